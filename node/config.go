package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/settee/settee/replicator"
)

// Config is everything a node needs; cmd/settee binds flags and SETTEE_*
// variables to it.
type Config struct {
	DataDir  string // badger and node files
	HTTPAddr string // host:port; port 0 picks one
	Admin    string // "user:password"; empty uses the stored admin or generates one
	// AdminIterations is the PBKDF2 iteration count of the start admin's
	// hash (0: CouchDB 3.5's 600,000). The tests lower it: one hash at
	// 600,000 iterations costs a second or more under the race detector,
	// and every test server hashes its admin as it starts.
	AdminIterations int
	Name            string // node name, e.g. settee@127.0.0.1
	Q               int    // default shards per new database
	N               int    // default copies of each shard (capped by the node count)
	// MemoryMB is the node's budget for badger's caches and memtables.
	MemoryMB int
	// ValueLogFileMB is the size of badger's value-log files (0: 16), the
	// unit in which compaction gives disk space back.
	ValueLogFileMB int
	// MaxDocumentSize and MaxRequestSize bound request bodies (bytes).
	MaxDocumentSize int64
	MaxRequestSize  int64
	// MaxAttachmentSize bounds one attachment (bytes; 0: no limit,
	// CouchDB's "infinity").
	MaxAttachmentSize int64
	Logger            *slog.Logger
	// LogLevel, when set, is the level of Logger's handler: _config's
	// log/level changes it at run time.
	LogLevel *slog.LevelVar
	// RequestTimeout bounds one request (not feeds or replications).
	RequestTimeout time.Duration
	// MaxRequestMemoryMB bounds the request body bytes the node holds at
	// once (0: half of MemoryMB, at least 64); MaxConnections the open
	// HTTP connections (0: DefaultMaxConnections); IOTimeout how long a
	// body read or an answer's write waits for the client (0:
	// DefaultIOTimeout). The start values of settee/max_request_memory_mb,
	// max_connections and io_timeout.
	MaxRequestMemoryMB int
	MaxConnections     int
	IOTimeout          time.Duration
	// HeartbeatInterval is how often a cluster node pings every other
	// member; NodeDownAfter is how long a member may go without answering
	// before this node counts it down (skips its copies, stops waiting on
	// it). NodeDownAfter must exceed HeartbeatInterval.
	HeartbeatInterval time.Duration
	NodeDownAfter     time.Duration
	// TLS serves HTTPS beside HTTP, CouchDB's [ssl] (node/tls.go); its
	// values are the start values of _config's ssl section.
	TLS TLSConfig
	// Cluster makes the node reachable by other nodes (issue 3).
	Cluster ClusterConfig
	// AdminPasswordOut receives the generated admin password, once
	// (stderr in settee serve).
	AdminPasswordOut func(user, password string)
	// ReplicatorRetryBase is the first retry delay of a crashed
	// replication job, doubling with each further crash (0: 2 s).
	ReplicatorRetryBase time.Duration
	// ReplicatorConnectionTimeout is CouchDB's [replicator]
	// connection_timeout: how long a replication's HTTP peer may send
	// nothing while a request waits on it, for replications that do not
	// set connection_timeout (0: 30 s).
	ReplicatorConnectionTimeout time.Duration
	// ReplicatorMaxJobs caps the replication jobs running at once
	// (CouchDB's [replicator] max_jobs; 0: 500). The others wait as
	// pending; every ReplicatorInterval (0: 60 s) up to ReplicatorMaxChurn
	// (0: 20) of the longest-running continuous jobs make way for them.
	ReplicatorMaxJobs  int
	ReplicatorMaxChurn int
	ReplicatorInterval time.Duration
	// HistoryInterval is how often the node samples its own metrics for
	// GET /_node/_local/_history (0: 5 s); the history keeps 15 minutes.
	HistoryInterval time.Duration
	// Handler builds the HTTP API the node serves from what it offers
	// (httpgw.ForNode in settee serve and the tests). node does not build
	// it itself: the HTTP layer sits above node and node never imports it.
	Handler func(Services) (http.Handler, error)
}

// DefaultMaxConnections and DefaultIOTimeout are the limits a node has
// when its Config names none.
const (
	DefaultMaxConnections = 4096
	DefaultIOTimeout      = 60 * time.Second
)

// Default returns a single-node configuration.
func Default() Config {
	return Config{
		DataDir:         "./data",
		HTTPAddr:        "127.0.0.1:5984",
		Name:            "settee@127.0.0.1",
		Q:               2,
		N:               3,
		RequestTimeout:  60 * time.Second,
		MemoryMB:        256,
		MaxDocumentSize: 8000000,
		MaxRequestSize:  4 << 30,

		HeartbeatInterval: DefaultHeartbeatInterval,
		NodeDownAfter:     DefaultNodeDownAfter,

		ReplicatorConnectionTimeout: replicator.DefaultConnectionTimeout,
	}
}

// Validate checks the configuration without side effects.
func (c Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data dir is empty"))
	}
	if c.HTTPAddr == "" {
		errs = append(errs, errors.New("http address is empty"))
	}
	if c.Q < 1 || c.Q > 256 {
		errs = append(errs, fmt.Errorf("q must be between 1 and 256, got %d", c.Q))
	}
	if c.Admin != "" {
		u, p, ok := strings.Cut(c.Admin, ":")
		if !ok || u == "" || p == "" {
			errs = append(errs, errors.New("admin must be user:password"))
		}
	}
	if c.AdminIterations < 0 {
		errs = append(errs, fmt.Errorf("admin iterations must not be negative, got %d", c.AdminIterations))
	}
	if c.MemoryMB < 32 {
		errs = append(errs, fmt.Errorf("memory budget must be at least 32 MB, got %d", c.MemoryMB))
	}
	if c.MaxDocumentSize <= 0 || c.MaxRequestSize <= 0 || c.MaxAttachmentSize < 0 {
		errs = append(errs, errors.New("size limits must be positive"))
	}
	if c.ReplicatorMaxJobs < 0 || c.ReplicatorMaxChurn < 0 || c.ReplicatorInterval < 0 {
		errs = append(errs, errors.New("replicator max jobs, max churn and interval must not be negative"))
	}
	if c.HistoryInterval < 0 || c.HistoryInterval > 15*time.Minute {
		errs = append(errs, fmt.Errorf("history interval must be between 0 and 15 minutes, got %v", c.HistoryInterval))
	}
	if c.ReplicatorConnectionTimeout < 0 {
		errs = append(errs, fmt.Errorf("replicator connection timeout must not be negative, got %v", c.ReplicatorConnectionTimeout))
	}
	switch {
	case c.HeartbeatInterval <= 0:
		errs = append(errs, fmt.Errorf("heartbeat interval must be positive, got %v", c.HeartbeatInterval))
	case c.NodeDownAfter <= 0:
		errs = append(errs, fmt.Errorf("node down-after must be positive, got %v", c.NodeDownAfter))
	case c.NodeDownAfter <= c.HeartbeatInterval:
		errs = append(errs, fmt.Errorf("node down-after (%v) must be longer than the heartbeat interval (%v): a member would be seen down between two heartbeats", c.NodeDownAfter, c.HeartbeatInterval))
	}
	if c.TLS.Addr != "" && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("an HTTPS address needs a certificate file and a key file"))
	}
	if err := c.Cluster.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
