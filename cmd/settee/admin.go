package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/settee/settee/admin"
)

// runAdmin is settee admin: the cluster admin CLI (package admin).
func runAdmin(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return admin.Run(ctx, args, os.Stdout)
}
