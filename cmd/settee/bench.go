package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/settee/settee/bench"
)

func runBench(args []string) error {
	// Run's GET ceiling starts `settee bench …` again as its server: it
	// serves from here and exits.
	bench.CeilingChild()
	var cfg bench.Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if f := fs.Lookup("workload"); f != nil {
		f.Usage += `; or "mango" (a Mango index on [g, v]: its build, equality and range _finds, a find no index serves; --docs default 20000, --lookups the equality finds, default 2000); or "flood" (one doc's GETs timed alone and in a flood of --hostile connections: slow bodies, 4 GiB announced bodies, gzip bombs; --readers default 8, --server-pid for the node's RSS); or "partitions" (the same view, _all_docs and _find queries within a partition on a partitioned and on a global db, q=8 unless --q; --docs default 20000 in each, --partitions default 100, --lookups the queries of each kind on each db, default 1000)`
	}
	fsyncDir := fs.String("fsync-dir", "", "instead of the workload, measure 4 KB write+fdatasync cycles per second in this directory (the ceiling for sequential durable updates)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fsyncDir != "" {
		r, err := bench.Fsync(*fsyncDir, 5*time.Second)
		if err != nil {
			return err
		}
		fmt.Printf("fsync: %d ops in %.1fs: %.0f Hz, p50 %.3fms, p99 %.3fms\n", r.Ops, r.Period.Seconds(), r.Hz, r.P50Ms, r.P99Ms)
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch cfg.Workload {
	case "", "fabric", "fabric_bench":
		_, err = bench.Run(ctx, cfg, os.Stdout, os.Stderr)
	case bench.WorkloadCompaction:
		// seed 002's shape unless told otherwise: 2000 docs, small
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["docs"] {
			cfg.Docs = 2000
		}
		if !set["doc-size"] {
			cfg.DocSize = bench.DocSmall
		}
		_, err = bench.RunCompaction(ctx, cfg, os.Stdout, os.Stderr)
	case bench.WorkloadViews:
		// issue 16's shape: 20000 medium docs (medium is already the default)
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["docs"] {
			cfg.Docs = bench.ViewsDocs
		}
		_, err = bench.RunViews(ctx, cfg, os.Stdout, os.Stderr)
	case bench.WorkloadMango:
		// the shape: 20000 medium docs (medium is already the
		// default); --lookups is the equality finds (default 2000)
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["docs"] {
			cfg.Docs = bench.MangoDocs
		}
		_, err = bench.RunMango(ctx, cfg, os.Stdout, os.Stderr)
	case bench.WorkloadPartitions:
		// the shape: q=8 (RunPartitions' default), 20000 medium
		// docs in each db
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["docs"] {
			cfg.Docs = bench.PartitionsDocs
		}
		_, err = bench.RunPartitions(ctx, cfg, os.Stdout, os.Stderr)
	case bench.WorkloadFlood:
		// a few readers (the flood is what is measured); --readers sets more
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["readers"] {
			cfg.Readers = bench.FloodReaders
		}
		_, err = bench.RunFlood(ctx, cfg, os.Stdout, os.Stderr)
	default:
		return fmt.Errorf("bench: unknown workload %q (want fabric, compaction, views, mango, partitions or flood)", cfg.Workload)
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
