package httpgw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchjs"
	"github.com/settee/settee/internal/couchpath"
	"github.com/settee/settee/node"
	"github.com/settee/settee/onewrite"
	"github.com/settee/settee/policy"
	"github.com/settee/settee/tasks"
)

// Databases creates, deletes and lists databases; node implements it.
type Databases interface {
	// CreateDB and DeleteDB report whether every node holding copies
	// acknowledged (201/200) or only some (202).
	CreateDB(ctx context.Context, name string, o node.DBOptions) (bool, error)
	DeleteDB(ctx context.Context, name string) (bool, error)
	AllDBs(ctx context.Context) []string
}

// Config wires a gateway.
type Config struct {
	Coordinator *coordinator.Coordinator
	Databases   Databases
	Admin       *auth.Credential
	// AdminPassword, when the node was started with the admin's password
	// (and so has just hashed or verified it), spares the first admin
	// request a second PBKDF2 verification.
	AdminPassword   string
	CookieSecret    []byte
	UUID            string
	Version         string
	GitSHA          string
	NodeName        string
	DefaultQ        int
	MaxDocumentSize int64
	MaxRequestSize  int64
	Logger          *slog.Logger
	// SessionTimeout is the AuthSession cookie lifetime (CouchDB: 600 s).
	SessionTimeout time.Duration
	// Tasks is the node's active task registry (GET /_active_tasks).
	Tasks *tasks.Registry
	// Settings is the node's runtime configuration (/_node/_local/_config).
	Settings Settings
	// Replicator serves /_replicate and /_scheduler (nil: 503).
	Replicator Replicator
	// Cluster is the node's membership; nil on a node built without it.
	Cluster Cluster
	// RequestTimeout bounds a request's work across shards and nodes (a
	// copy on a node that died costs at most this); feeds and one-shot
	// replications, which are long by nature, are not bounded. 0: none.
	RequestTimeout time.Duration
	// Metrics records requests and serves /_node/_local/_prometheus (nil:
	// not recorded, 404).
	Metrics Metrics
	// DBUpdates serves /_db_updates (nil: 404).
	DBUpdates DBUpdates
	// JS runs design-doc functions (JavaScript reduces of views).
	JS *couchjs.Pool
	// Policy decides what each user may write and read (nil: one is built
	// over Coordinator, JS and Settings).
	Policy *policy.Policy
	// NodeKey signs the user of a /_node/<other> request forwarded to
	// another member, and checks such requests (nodeproxy.go); derived
	// from the cluster secret, nil on a node outside a cluster.
	NodeKey []byte
	// Connections counts the node's open HTTP(S) connections and those
	// refused past settee/max_connections (nil: not shown in _system).
	Connections func() (open, refused int64)
}

// Gateway is the CouchDB HTTP API of one node.
type Gateway struct {
	cfg     Config
	c       *coordinator.Coordinator
	pol     *policy.Policy
	dbs     Databases
	log     *slog.Logger
	welcome []byte // GET / is built once (seed 004)
	stats   stats
	server  string
	auth    *authenticator
	// corsSnap is the CORS settings parsed from _config (cors.go)
	corsSnap atomic.Pointer[corsSnapshot]
	// console is the web console at /_utils (console.go)
	console http.Handler
	// findBufs holds the buffers _find's docs are rendered into
	// (find.go), reused from one batch of docs to the next
	findBufs bufPool
	// docBufs holds the buffers a GET's doc is rendered into (getDoc),
	// one per GET in flight
	docBufs bufPool
	// bodies counts the request body bytes held (limits.go)
	bodies bodyMeter
}

// bufPool keeps the buffers answers are rendered into, for the next
// request to reuse instead of allocating, zeroing and collecting its
// own; a buffer grown past max goes to the GC rather than stay held.
type bufPool struct {
	p   sync.Pool
	max int
}

// get is an empty buffer, reused when the pool has one.
func (b *bufPool) get() *[]byte {
	if p, _ := b.p.Get().(*[]byte); p != nil {
		*p = (*p)[:0]
		return p
	}
	return new([]byte)
}

// put gives buf back once nothing refers to its bytes any more.
func (b *bufPool) put(buf *[]byte) {
	if cap(*buf) <= b.max {
		b.p.Put(buf)
	}
}

// New builds a gateway.
func New(cfg Config) (*Gateway, error) {
	if cfg.Coordinator == nil || cfg.Databases == nil || cfg.Admin == nil {
		return nil, errors.New("httpgw: coordinator, databases and admin are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Tasks == nil {
		cfg.Tasks = tasks.New(cfg.NodeName)
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 600 * time.Second
	}
	g := &Gateway{cfg: cfg, c: cfg.Coordinator, dbs: cfg.Databases, log: cfg.Logger,
		server: "settee/" + cfg.Version}
	g.findBufs.max, g.docBufs.max = maxFindBuf, maxPooledDoc
	g.pol = cfg.Policy
	if g.pol == nil {
		var st policy.Settings
		if cfg.Settings != nil {
			st = cfg.Settings
		}
		g.pol = policy.New(policy.Config{Coordinator: cfg.Coordinator, JS: cfg.JS, Settings: st})
	}
	w, err := json.Marshal(map[string]any{
		"couchdb": "Welcome",
		"version": "3.5.2",
		"git_sha": cfg.GitSHA,
		"uuid":    cfg.UUID,
		// only what settee has: clients look here before they use a
		// feature (CouchDB 3.5 also lists access-ready,
		// pluggable-storage-engines and reshard)
		"features": []string{"partitioned", "scheduler"},
		"vendor":   map[string]string{"name": "settee", "version": cfg.Version},
		// settee's own version is in vendor; "version" is the CouchDB API
		// level it implements, which clients check for features
	})
	if err != nil {
		return nil, err
	}
	g.welcome = append(w, '\n')
	g.auth = newAuthenticator(g)
	if a := cfg.Admin; a != nil && cfg.AdminPassword != "" {
		g.auth.remember(a.Name, cfg.AdminPassword, a)
	}
	g.stats.start = time.Now()
	g.console = g.newConsole()
	return g, nil
}

// req is one request being served.
type req struct {
	w   http.ResponseWriter
	r   *http.Request
	ctx context.Context
	g   *Gateway
	// held is the body bytes this request's reads were charged (limits.go)
	held int64
	// bodyDone: the body was read to its end (limits.go)
	bodyDone bool
	rc       *http.ResponseController
	user     *User
	subj     *policy.Subject // user as the policy sees it (who)
	// path segments, unescaped
	segs []string
	q    url.Values
}

// ServeHTTP routes a request. A panic is recovered, logged and answered 500.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sr := &statusRecorder{ResponseWriter: w, io: g.ioTimeout()}
	// whatever this connection's last answer left as its write deadline,
	// this one's header and body have io_timeout from now
	sr.deadline()
	var rq *req
	defer func() {
		g.stats.count(r.Method, sr.status)
		g.observe(rq, r.Method, sr.status, start)
	}()
	w = sr
	h := w.Header()
	h.Set("Server", g.server)
	h.Set("Cache-Control", "must-revalidate")
	h.Set("X-Couch-Request-Id", requestID(r))
	rq = &req{w: w, r: r, ctx: r.Context(), g: g}
	defer rq.release()
	// a preflight is answered before authentication, as CouchDB does
	if g.cors(rq, sr) {
		return
	}
	// a client that can send only GET and POST (a browser form, a proxy)
	// names the method it means; CouchDB honours it on POST alone
	if m := r.Header.Get("X-Http-Method-Override"); m != "" && r.Method == http.MethodPost {
		r.Method = m
	}
	rq.q = r.URL.Query()
	timeout := g.cfg.RequestTimeout
	if g.cfg.Settings != nil {
		timeout = g.cfg.Settings.RequestTimeout()
	}
	if timeout > 0 && !longRequest(r) {
		var cancel context.CancelFunc
		rq.ctx, cancel = context.WithTimeout(rq.ctx, timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			g.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			g.fail(rq, newErr(500, "unknown_error", fmt.Sprint(p)))
		}
	}()
	segs, err := splitPath(r.URL.EscapedPath())
	if err != nil {
		g.fail(rq, badRequest("invalid path"))
		return
	}
	rq.segs = segs
	if len(segs) > 0 && segs[0] == "_utils" {
		// the console has pages of its own (its login among them) and
		// asks the API as the browser's user for everything it shows
		g.console.ServeHTTP(w, r)
		return
	}
	user, err := g.auth.authenticate(rq)
	if err != nil {
		g.fail(rq, err)
		return
	}
	rq.user = user
	if user == nil && g.requireValidUser(rq) {
		g.fail(rq, errAuthRequired)
		return
	}
	if err := g.route(rq); err != nil {
		g.fail(rq, err)
	}
}

// requestID is the request's X-Couch-Request-ID: the client's own when it
// sent one (CouchDB echoes it, so a client can follow a request through
// the logs), else 10 random hex digits as CouchDB makes them.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Couch-Request-Id"); id != "" {
		return id
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// longRequest: change feeds, streamed row reads and replications run as
// long as they need (each page still has its own bound).
func longRequest(r *http.Request) bool {
	p := r.URL.Path
	// _find reads an index (waiting for its build, as a view query) or
	// scans the database
	for _, suffix := range []string{"/_changes", "/_all_docs", "/_design_docs", "/_local_docs", "/_all_docs/queries", "/_find"} {
		if strings.HasSuffix(p, suffix) {
			return true
		}
	}
	// a view query waits for its index's build as long as the build
	// takes (the client's own timeout ends it, not the node's): issue 16
	if strings.Contains(p, "/_view/") || strings.Contains(p, "/_list/") {
		return true
	}
	return strings.HasPrefix(p, "/_replicate") || strings.HasPrefix(p, "/_db_updates")
}

func splitPath(p string) ([]string, error) {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return nil, nil
	}
	parts := strings.Split(p, "/")
	for i, s := range parts {
		u, err := couchpath.Unescape(s)
		if err != nil {
			return nil, err
		}
		parts[i] = u
	}
	return parts, nil
}

func (g *Gateway) route(rq *req) error {
	if len(rq.segs) == 0 {
		return g.handleRoot(rq)
	}
	first := rq.segs[0]
	if strings.HasPrefix(first, "_") {
		switch first {
		case "_up":
			return g.handleUp(rq)
		case "_uuids":
			return g.handleUUIDs(rq)
		case "_all_dbs":
			return g.handleAllDBs(rq)
		case "_dbs_info":
			return g.handleDBsInfo(rq)
		case "_session":
			return g.handleSession(rq)
		case "_active_tasks":
			return g.handleActiveTasks(rq)
		case "_membership":
			return g.handleMembership(rq)
		case "_replicate":
			return g.handleReplicate(rq)
		case "_scheduler":
			return g.handleScheduler(rq)
		case "_cluster_setup":
			return g.handleClusterSetup(rq)
		case "_node":
			return g.handleNode(rq)
		case "_db_updates":
			return g.handleDBUpdates(rq)
		case "_users", "_replicator", "_global_changes":
			return g.routeDB(rq)
		}
		// as CouchDB: creating such a database is a bad name, anything
		// else asked of it a database that does not exist
		if rq.r.Method == http.MethodPut && len(rq.segs) == 1 {
			return illegalDBName(first)
		}
		return errDBNotFound
	}
	return g.routeDB(rq)
}

func methodNotAllowed(allowed string) error {
	return newErr(405, "method_not_allowed", "Only "+allowed+" allowed")
}

// writeJSON answers with v marshalled (or raw bytes as they are).
func (g *Gateway) writeJSON(rq *req, status int, v any) error {
	var b []byte
	switch t := v.(type) {
	case []byte:
		b = t
	case json.RawMessage:
		b = t
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
		b = append(b, '\n')
	}
	h := rq.w.Header()
	h.Set("Content-Type", "application/json")
	// CouchDB's JSON answers (send_json, start_json_response) carry
	// Cache-Control: must-revalidate unless the handler set its own
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "must-revalidate")
	}
	// a known length lets net/http send the body in one write instead
	// of chunked encoding
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if len(b) > holdAbove && rq.r.Method != http.MethodHead {
		// header and body in one write, where net/http would write its
		// 4 KB buffer and then the rest (onewrite)
		if send := onewrite.Hold(rq.r, len(b)); send != nil {
			defer func() { _ = send() }()
			rq.w.WriteHeader(status)
			_, _ = rq.w.Write(b)
			rq.w.(http.Flusher).Flush()
			return nil
		}
	}
	rq.w.WriteHeader(status)
	if rq.r.Method != http.MethodHead {
		_, _ = rq.w.Write(b)
	}
	return nil
}

// holdAbove: a smaller answer and its header fit net/http's 4 KB buffer,
// which it writes once anyway.
const holdAbove = 3 << 10

func (g *Gateway) fail(rq *req, err error) {
	ce := toCouch(err)
	if ce.status >= 500 {
		g.log.Error("request failed", "method", rq.r.Method, "path", rq.r.URL.Path, "err", err)
	}
	if ce.status == 401 && g.unauthorized(rq, ce) {
		return
	}
	// an error is answered afresh, as CouchDB's send_error: none of the
	// headers the handler had set for its answer
	h := rq.w.Header()
	for _, k := range []string{"ETag", "Location", "Accept-Ranges", "Content-Range", "Content-Encoding"} {
		h.Del(k)
	}
	h.Set("Cache-Control", "must-revalidate")
	body := map[string]string{"error": ce.code, "reason": ce.reason}
	if ce.noReason {
		delete(body, "reason")
	}
	b, _ := json.Marshal(body)
	_ = g.writeJSON(rq, ce.status, append(b, '\n'))
}

// rawAnswer readies an answer that CouchDB sends with send_response or a
// chunked start of its own rather than as JSON (a 304, a redirect,
// multipart bodies, _show/_list/_update): it has no Cache-Control.
func rawAnswer(rq *req) { rq.w.Header().Del("Cache-Control") }

// notModified answers 304 as CouchDB's etag_respond: the ETag alone.
func notModified(rq *req) {
	rawAnswer(rq)
	rq.w.WriteHeader(http.StatusNotModified)
}

var okBody = []byte("{\"ok\":true}\n")

// readBody reads a request body up to limit bytes (decompressed when it
// was sent gzipped: bodyReader) into a buffer that grows as bytes arrive.
func readBody(rq *req, limit int64) ([]byte, error) {
	r, err := bodyReader(rq, limit)
	if err != nil {
		return nil, err
	}
	b, err := r.readAll()
	if err != nil {
		return nil, bodyErr(err)
	}
	return b, nil
}

func requireJSON(rq *req) error {
	ct := rq.r.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if strings.TrimSpace(strings.ToLower(ct)) != "application/json" {
		return errBadCType
	}
	return nil
}

// decodeJSON reads a small JSON request body into v, a pointer to a
// struct or a map, as decodeObject does.
func (g *Gateway) decodeJSON(rq *req, v any) error {
	return decodeJSONUpTo(rq, g.cfg.MaxRequestSize, v)
}

// decodeJSONUpTo is decodeJSON for an endpoint whose bodies are small: no
// more than limit bytes are read (limits.go).
func decodeJSONUpTo(rq *req, limit int64, v any) error {
	b, err := readBody(rq, limit)
	if err != nil {
		return err
	}
	return decodeObject(b, v)
}
