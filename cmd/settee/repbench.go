package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/settee/settee/repbench"
)

func runRepBench(args []string) error {
	var cfg repbench.Config
	fs := flag.NewFlagSet("repbench", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	_, err := repbench.Run(ctx, cfg, os.Stdout)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
