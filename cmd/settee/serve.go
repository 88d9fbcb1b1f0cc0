package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/settee/settee/httpgw"
	"github.com/settee/settee/node"
)

// envDefault lets SETTEE_<NAME> set a flag's default.
func envDefault(name, def string) string {
	if v, ok := os.LookupEnv("SETTEE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); ok {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := envDefault(name, ""); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func envInt(name string, def int) int {
	if v := envDefault(name, ""); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

func serve(args []string) error {
	cfg := node.Default()
	cfg.Handler = httpgw.ForNode
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.DataDir, "data-dir", envDefault("data-dir", cfg.DataDir), "data directory (SETTEE_DATA_DIR)")
	fs.StringVar(&cfg.HTTPAddr, "http", envDefault("http", cfg.HTTPAddr), "HTTP listen address (SETTEE_HTTP)")
	fs.StringVar(&cfg.TLS.Addr, "tls-addr", envDefault("tls-addr", ""), "HTTPS listen address host:port beside --http (CouchDB's [ssl] enable and port); needs --tls-cert and --tls-key (SETTEE_TLS_ADDR)")
	fs.StringVar(&cfg.TLS.CertFile, "tls-cert", envDefault("tls-cert", ""), "PEM certificate (chain) for HTTPS, read again when it changes (SETTEE_TLS_CERT)")
	fs.StringVar(&cfg.TLS.KeyFile, "tls-key", envDefault("tls-key", ""), "PEM private key of --tls-cert, unencrypted (SETTEE_TLS_KEY)")
	fs.StringVar(&cfg.Admin, "admin", envDefault("admin", ""), "server admin as user:password (SETTEE_ADMIN); generated and printed once if none is stored")
	fs.StringVar(&cfg.Name, "name", envDefault("name", cfg.Name), "node name (SETTEE_NAME)")
	fs.IntVar(&cfg.Q, "q", envInt("q", cfg.Q), "default shards per new database (SETTEE_Q)")
	fs.IntVar(&cfg.N, "n", envInt("n", cfg.N), "default copies of each shard, capped by the number of nodes (SETTEE_N)")
	fs.IntVar(&cfg.MemoryMB, "memory-mb", envInt("memory-mb", cfg.MemoryMB), "memory budget, MB: the store's caches and memtables are sized from it, and it is the Go runtime's soft memory limit unless GOMEMLIMIT is set (SETTEE_MEMORY_MB)")
	maxDoc := fs.Int64("max-document-size", int64(envInt("max-document-size", int(cfg.MaxDocumentSize))), "largest document accepted, bytes (SETTEE_MAX_DOCUMENT_SIZE)")
	fs.Int64Var(&cfg.MaxAttachmentSize, "max-attachment-size", int64(envInt("max-attachment-size", 0)), "largest attachment accepted, bytes; 0: no limit (SETTEE_MAX_ATTACHMENT_SIZE)")
	fs.StringVar(&cfg.Cluster.NodeAddr, "node-addr", envDefault("node-addr", ""), "node-to-node listen address host:port; empty runs a single node (SETTEE_NODE_ADDR)")
	fs.StringVar(&cfg.Cluster.AdvertiseAddr, "advertise-addr", envDefault("advertise-addr", ""), "node address other nodes dial, when it differs from --node-addr (SETTEE_ADVERTISE_ADDR)")
	fs.StringVar(&cfg.Cluster.Secret, "cluster-secret", envDefault("cluster-secret", ""), "shared secret of the cluster's nodes (SETTEE_CLUSTER_SECRET)")
	join := fs.String("join", envDefault("join", ""), "HTTP addresses host:port[,...] of nodes to join at start-up (SETTEE_JOIN)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", envDuration("request-timeout", cfg.RequestTimeout), "bound on one request's work across shards and nodes; feeds and replications excepted (SETTEE_REQUEST_TIMEOUT)")
	fs.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", envDuration("heartbeat-interval", cfg.HeartbeatInterval), "how often a cluster node pings each other member (SETTEE_HEARTBEAT_INTERVAL)")
	fs.DurationVar(&cfg.NodeDownAfter, "node-down-after", envDuration("node-down-after", cfg.NodeDownAfter), "a member that has not answered for this long is seen down: its copies are skipped and requests stop waiting on it; longer than --heartbeat-interval (SETTEE_NODE_DOWN_AFTER)")
	fs.DurationVar(&cfg.ReplicatorConnectionTimeout, "replicator-connection-timeout", envDuration("replicator-connection-timeout", cfg.ReplicatorConnectionTimeout), "how long a replication's HTTP peer may send nothing before the request fails and is retried (CouchDB's [replicator] connection_timeout); a replication's connection_timeout overrides it (SETTEE_REPLICATOR_CONNECTION_TIMEOUT)")
	fs.IntVar(&cfg.ReplicatorMaxJobs, "replicator-max-jobs", envInt("replicator-max-jobs", 500), "replication jobs running at once; the others wait as pending and are rotated in (CouchDB's [replicator] max_jobs) (SETTEE_REPLICATOR_MAX_JOBS)")
	fs.IntVar(&cfg.ReplicatorMaxChurn, "replicator-max-churn", envInt("replicator-max-churn", 20), "running continuous jobs stopped per rotation to let pending ones run (CouchDB's max_churn) (SETTEE_REPLICATOR_MAX_CHURN)")
	fs.DurationVar(&cfg.ReplicatorInterval, "replicator-interval", envDuration("replicator-interval", time.Minute), "how often pending jobs are rotated in when max jobs run (CouchDB's interval) (SETTEE_REPLICATOR_INTERVAL)")
	pprofAddr := fs.String("pprof", envDefault("pprof", ""), "serve net/http/pprof on this address, e.g. 127.0.0.1:6060 (SETTEE_PPROF)")
	logLevel := fs.String("log-level", envDefault("log-level", "info"), "debug, info, warn or error (SETTEE_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.MaxDocumentSize = *maxDoc
	if cfg.Admin == "" && envDefault("require-admin", "") != "" {
		return errors.New("SETTEE_ADMIN is required (user:password): this image does not generate an admin")
	}
	if *join != "" && cfg.Admin == "" {
		return errors.New("--join needs --admin (SETTEE_ADMIN): joining uses the admin credentials on the other node")
	}
	for _, j := range strings.Split(*join, ",") {
		if j = strings.TrimSpace(j); j != "" {
			cfg.Cluster.Join = append(cfg.Cluster.Join, j)
		}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	// _config's log/level changes it at run time
	cfg.LogLevel = new(slog.LevelVar)
	cfg.LogLevel.Set(lvl)
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	cfg.AdminPasswordOut = func(user, pw string) {
		fmt.Fprintf(os.Stderr, "\n  settee generated a server admin (shown once, stored hashed):\n    user: %s\n    password: %s\n\n", user, pw)
	}
	if *pprofAddr != "" {
		go func() {
			// the default mux carries net/http/pprof's handlers
			cfg.Logger.Info("pprof listening", "addr", *pprofAddr, "err", http.ListenAndServe(*pprofAddr, nil))
		}()
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && cfg.MemoryMB > 0 {
		// the memory budget is the Go runtime's soft limit too: without
		// it the heap grew to twice what was live, and 4 _bulk_docs of
		// 1,000 medium docs at once took the anonymous RSS to 262-298 MB
		// against 218-221 MB with it, at the same throughput
		// (docs/benchmarks.md, "Memory")
		debug.SetMemoryLimit(int64(cfg.MemoryMB) << 20)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case err := <-n.Done():
		cfg.Logger.Error("http server stopped", "err", err)
	}
	cfg.Logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return n.Close(sctx)
}

func version() error {
	fmt.Printf("settee %s", node.Version)
	if node.GitSHA != "" {
		fmt.Printf(" (%s)", node.GitSHA)
	}
	fmt.Println()
	return nil
}
