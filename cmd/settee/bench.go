package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/settee/settee/bench"
)

func runBench(args []string) error {
	var cfg bench.Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	_, err := bench.Run(ctx, cfg, os.Stdout, os.Stderr)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
