package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/connlimit"
	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchjs"
	"github.com/settee/settee/metrics"
	"github.com/settee/settee/onewrite"
	"github.com/settee/settee/policy"
	"github.com/settee/settee/replicator"
	"github.com/settee/settee/shard"
	"github.com/settee/settee/smoosh"
	"github.com/settee/settee/storage"
	"github.com/settee/settee/tasks"
	"github.com/settee/settee/views"
)

// Version is settee's version, stamped at build time.
var Version = "0.1.0-dev"

// GitSHA is the commit settee was built from, stamped at build time.
var GitSHA = ""

// Node is a running settee process.
type Node struct {
	cfg   Config
	conns connlimit.Limiter // settee/max_connections over HTTP and HTTPS
	log   *slog.Logger
	store *storage.Store
	db    *badger.DB // store.DB
	reads *shard.ReadPool
	sys   *actor.ActorSystem
	cat   *catalog
	upd   *dbUpdates // the /_db_updates events (dbupdates.go)
	coord *coordinator.Coordinator
	js    *couchjs.Pool
	pol   *policy.Policy
	views *views.Service
	srv   *http.Server
	ln    net.Listener
	// tlsSrv and tlsLn serve HTTPS beside HTTP when [ssl] enables it
	// (tls.go); nil otherwise
	tlsSrv *http.Server
	tlsLn  net.Listener
	uuid   string
	cl     *cluster // nil on a single node
	tasks  *tasks.Registry
	rep    *replicator.Scheduler
	disk   *storage.Disk // store.Disk
	// smoosh compacts databases by itself (smoosh.go)
	smoosh *smoosh.Daemon
	// metrics is the node's Prometheus registry (/_node/_local/_prometheus)
	metrics *metrics.Metrics
	// histStop stops the sampler of the metrics' history
	// (/_node/_local/_history), histDone waits for it
	histStop chan struct{}
	histDone sync.WaitGroup
	// conf is the node's _config (nodeconfig.go); startAdmin the admin
	// loadAdmin found or made, kept under node key 'A'
	conf       *nodeConfig
	startAdmin *auth.Credential

	closeOnce sync.Once
	closeErr  error
	served    chan error
	serving   sync.WaitGroup // the HTTP server's Serve
}

// Services is what a started node offers the HTTP layer it serves
// (Config.Handler builds the handler from it).
type Services struct {
	// Node creates and deletes databases, answers for the cluster's
	// membership, holds the runtime config and syncs shards.
	Node        *Node
	Coordinator *coordinator.Coordinator
	// Replicator is the local scheduler on a single node, the whole
	// cluster's view on a member of a cluster.
	Replicator Replications
	Tasks      *tasks.Registry
	Metrics    *metrics.Metrics
	Admin      *auth.Credential
	// AdminPassword is the admin's password when the node was started
	// with it (and so has just hashed or verified it); empty otherwise.
	AdminPassword   string
	CookieSecret    []byte
	UUID            string
	Version         string
	GitSHA          string
	Name            string
	DefaultQ        int
	MaxDocumentSize int64
	MaxRequestSize  int64
	RequestTimeout  time.Duration
	Logger          *slog.Logger
	// JS runs design-doc functions (reduce, validate_doc_update, …).
	JS *couchjs.Pool
	// Policy decides what each user may write and read; the gateway and
	// the replicator's local endpoints go through it.
	Policy *policy.Policy
	// NodeKey is derived from the cluster secret (nil outside a cluster):
	// a request one member forwards to another as its user is signed
	// with it.
	NodeKey []byte
}

// Replications is the replicator as /_replicate and /_scheduler reach it.
type Replications interface {
	Replicate(ctx context.Context, body []byte) (int, []byte)
	Jobs(ctx context.Context) (int, []byte)
	Docs(ctx context.Context, db, docID string) (int, []byte)
}

// Start opens the store, starts the shard actors and listens for HTTP.
// It returns once the node answers requests.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("node: config: %w", err)
	}
	if cfg.Handler == nil {
		return nil, errors.New("node: config: no HTTP handler (Config.Handler)")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	// room for both servers' ends: neither's goroutine blocks on the send
	n := &Node{cfg: cfg, log: log, served: make(chan error, 2)}
	var err error
	if n.store, err = storage.Open(storage.Options{DataDir: cfg.DataDir, MemoryMB: cfg.MemoryMB,
		ValueLogFileMB: cfg.ValueLogFileMB, Logger: log}); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n.db, n.disk = n.store.DB, n.store.Disk
	n.tasks = tasks.New(cfg.Name)
	n.metrics = metrics.New(metrics.Config{Tasks: n.tasks, Storage: n.db, Disk: n.disk,
		HistoryInterval: cfg.HistoryInterval})
	fail := func(err error) (*Node, error) {
		if n.ln != nil {
			_ = n.ln.Close()
		}
		if n.tlsLn != nil {
			_ = n.tlsLn.Close()
		}
		if n.cl != nil {
			n.stopCluster()
		}
		if n.upd != nil {
			n.upd.close()
		}
		if n.sys != nil {
			n.sys.Shutdown()
		}
		if n.reads != nil {
			n.reads.Close()
		}
		_ = n.store.Close()
		return nil, err
	}
	// a member of a cluster started without its transport would serve its
	// own copies alone and never reach the others' (nor they its own)
	if cfg.Cluster.NodeAddr == "" {
		peers, err := storedPeers(n.db, cfg.Name)
		if err != nil {
			return fail(err)
		}
		if len(peers) > 0 {
			return fail(fmt.Errorf("%w (its members: %s)", ErrClusterMember, strings.Join(peers, ", ")))
		}
	}
	uuid, err := loadOrCreate(n.db, keyNodeUUID, func() ([]byte, error) { return []byte(newUUID()), nil })
	if err != nil {
		return fail(err)
	}
	n.uuid = string(uuid)
	secret, err := loadOrCreate(n.db, keySecret, func() ([]byte, error) { return []byte(newUUID() + newUUID()), nil })
	if err != nil {
		return fail(err)
	}
	if err := n.loadConfig(); err != nil {
		return fail(err)
	}
	httpAddr := n.httpAddr()
	// a bad certificate fails the start before anything listens
	tlsAddr, tlsConf, err := n.tlsSetup(httpAddr)
	if err != nil {
		return fail(err)
	}
	admin, err := n.loadAdmin()
	if err != nil {
		return fail(err)
	}
	n.startAdmin = admin
	n.loadAdmins(admin)
	n.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return log.With("src", "actor")
	}))
	// enough workers for the reads a busy node has in flight; more get
	// goroutines of their own
	n.reads = shard.NewReadPool(max(8, 4*runtime.GOMAXPROCS(0)))
	if n.upd, err = newDBUpdates(n.db, log, n.uuid); err != nil {
		return fail(err)
	}
	n.upd.spread = n.spreadUpdates
	n.upd.start()
	if n.cat, err = newCatalog(n.db, n.sys, cfg.Name, log, n.disk, n.tasks, n.metrics, n.reads, n.upd, n.MaxPartitionSize); err != nil {
		return fail(err)
	}
	n.coord = coordinator.New(n.sys.Root, n.cat)
	n.js = couchjs.New(n.conf.jsConfig(log))
	n.pol = policy.New(policy.Config{Coordinator: n.coord, JS: n.js, Settings: n})
	n.views = views.New(views.Config{DB: n.db, JS: n.js, Copies: n.cat, Logger: log, Go: n.reads.Go, SinceWrite: n.disk.SinceWrite, Tasks: n.tasks, Reclaim: n.disk.Reclaim,
		BackgroundRefresh: n.ViewBackgroundRefresh})
	if err := n.views.Register(n.sys); err != nil {
		return fail(err)
	}
	n.cat.beforeDrop = n.views.StopCopy
	n.coord.SetViews(n.views)
	if err := n.ensureSystemDBs(ctx, cfg.Cluster.NodeAddr != ""); err != nil {
		return fail(err)
	}
	// listen first: the cluster records this node's real HTTP address
	n.ln, err = net.Listen("tcp", httpAddr)
	if err != nil {
		return fail(fmt.Errorf("node: listen %s: %w", httpAddr, err))
	}
	_, port := splitAddr(n.ln.Addr().String())
	n.conf.setStart("chttpd", "port", port)
	if tlsConf != nil {
		if n.tlsLn, err = net.Listen("tcp", tlsAddr); err != nil {
			return fail(fmt.Errorf("node: https: listen %s: %w", tlsAddr, err))
		}
		_, port := splitAddr(n.tlsLn.Addr().String())
		n.conf.setStart("ssl", "port", port)
	}
	if err := n.startCluster(ctx, cfg.Cluster, n.ln.Addr().String()); err != nil {
		return fail(err)
	}
	if err := n.ensureUsersDesign(ctx); err != nil {
		log.Warn("writing _users/_design/_auth", "err", err)
	}
	n.startReplicator()
	n.startSmoosh()
	adminPW := ""
	if user, pw, ok := strings.Cut(cfg.Admin, ":"); ok && user == admin.Name {
		adminPW = pw // loadAdmin hashed or verified it just now
	}
	var rep Replications = n.rep
	if n.cl != nil {
		rep = clusterScheduler{n}
	}
	h, err := cfg.Handler(Services{
		Node:            n,
		Coordinator:     n.coord,
		Replicator:      rep,
		Tasks:           n.tasks,
		Metrics:         n.metrics,
		Admin:           admin,
		AdminPassword:   adminPW,
		CookieSecret:    secret,
		UUID:            n.uuid,
		Version:         Version,
		GitSHA:          GitSHA,
		Name:            cfg.Name,
		DefaultQ:        cfg.Q,
		MaxDocumentSize: cfg.MaxDocumentSize,
		MaxRequestSize:  cfg.MaxRequestSize,
		RequestTimeout:  cfg.RequestTimeout,
		Logger:          log,
		JS:              n.js,
		Policy:          n.pol,
		NodeKey:         nodeKey(cfg.Cluster.Secret),
	})
	if err != nil {
		return fail(err)
	}
	n.histStop = make(chan struct{})
	n.histDone.Go(func() { n.metrics.History().Run(n.histStop) })
	// onewrite: a response the gateway holds leaves in one write
	// the timeouts and caps that keep one client from holding the node
	// (docs/security.md, "What limits protect the node"): a request's
	// header must arrive within ReadHeaderTimeout and fit MaxHeaderBytes,
	// a kept-alive connection idles IdleTimeout at most, and the body and
	// the answer wait settee/io_timeout for the client (httpgw/limits.go)
	n.conns.Max = n.MaxConnections
	n.srv = &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		ConnContext:    onewrite.ConnContext,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	busy := connlimit.BusyHTTP("the node has as many connections as settee/max_connections allows")
	n.serving.Go(func() { n.served <- n.srv.Serve(onewrite.Listen(n.conns.Listen(n.ln, busy))) })
	if tlsConf != nil {
		n.tlsSrv = &http.Server{Handler: h, TLSConfig: tlsConf, ReadHeaderTimeout: headerTimeout,
			IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		// the files are the reloader's (GetCertificate), none named here;
		// a refused TLS connection is closed without a word (no handshake)
		n.serving.Go(func() { n.served <- n.tlsSrv.ServeTLS(n.conns.Listen(n.tlsLn, nil), "", "") })
		log.Info("settee serves https", "https", n.tlsLn.Addr().String())
	}
	log.Info("settee started", "http", n.ln.Addr().String(), "data", cfg.DataDir, "node", cfg.Name)
	return n, nil
}

// The HTTP server's own bounds on a connection (the settable ones are in
// _config: settee/max_connections, io_timeout, max_request_memory_mb).
// CouchDB (mochiweb) answers a header line past about 8 KB 400; settee
// takes a whole header of up to 64 KB (cookies and JWTs grow) and answers
// 431 past it, so a thousand slow headers hold 64 MB at most.
const (
	headerTimeout  = 30 * time.Second
	idleTimeout    = 2 * time.Minute
	maxHeaderBytes = 64 << 10
)

// Connections is how many HTTP(S) connections are open now, and how many
// were refused past settee/max_connections since the node started.
func (n *Node) Connections() (open, refused int64) { return n.conns.Open(), n.conns.Refused() }

// Addr is the HTTP listen address.
func (n *Node) Addr() string { return n.ln.Addr().String() }

// URL is the node's base URL, without credentials.
func (n *Node) URL() string { return "http://" + n.Addr() }

// TLSAddr is the HTTPS listen address; "" when HTTPS is off.
func (n *Node) TLSAddr() string {
	if n.tlsLn == nil {
		return ""
	}
	return n.tlsLn.Addr().String()
}

// Done is closed with the serve error if the HTTP server stops by itself.
func (n *Node) Done() <-chan error { return n.served }

// Close stops accepting requests, waits for those in flight (up to ctx),
// lets every shard finish its commits and closes badger.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		var errs []error
		// both listeners close at once, then both drain
		var tlsErr error
		var tlsDone sync.WaitGroup
		if n.tlsSrv != nil {
			tlsDone.Go(func() { tlsErr = n.tlsSrv.Shutdown(ctx) })
		}
		if err := n.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("node: http shutdown: %w", err))
		}
		tlsDone.Wait()
		if tlsErr != nil {
			errs = append(errs, fmt.Errorf("node: https shutdown: %w", tlsErr))
		}
		n.serving.Wait()
		close(n.histStop)
		n.histDone.Wait()
		n.upd.close()
		n.stopCluster()
		n.rep.Close()
		n.smoosh.Stop()
		n.views.Close()
		n.js.Close()
		n.cat.stopAll()
		n.sys.Shutdown()
		n.reads.Close()
		if err := n.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("node: %w", err))
		}
		n.closeErr = errors.Join(errs...)
		n.log.Info("settee stopped")
	})
	return n.closeErr
}

// DBOptions are a new database's: Q ranges of N copies each (0: the
// defaults), partitioned or not.
type DBOptions struct {
	Q, N        int
	Partitioned bool
}

// CreateDB creates a database; it reports false when a member did not
// acknowledge (202), ErrDBExists when the database exists.
func (n *Node) CreateDB(ctx context.Context, name string, o DBOptions) (bool, error) {
	if o.Q <= 0 {
		o.Q = n.defaultQ()
	}
	return n.createDB(ctx, name, o)
}

// DeleteDB deletes a database; false when a member did not acknowledge.
func (n *Node) DeleteDB(ctx context.Context, name string) (bool, error) {
	return n.deleteDB(ctx, name)
}

// AllDBs lists the databases, sorted.
func (n *Node) AllDBs(context.Context) []string { return n.cat.List() }
