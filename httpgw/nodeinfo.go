package httpgw

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/settee/settee/internal/couchpath"
)

// stats counts what /_node/<name>/_stats reports, in CouchDB's shape
// ({"couchdb":{"httpd":{...}}} with {"value","type","desc"} leaves).
type stats struct {
	start    time.Time
	requests atomic.Int64
	methods  [8]atomic.Int64 // GET HEAD POST PUT DELETE COPY other
	statuses [6]atomic.Int64 // 1xx..5xx by class, [0] unused
}

var methodIdx = map[string]int{"GET": 0, "HEAD": 1, "POST": 2, "PUT": 3, "DELETE": 4, "COPY": 5}

func (s *stats) count(method string, status int) {
	s.requests.Add(1)
	if i, ok := methodIdx[method]; ok {
		s.methods[i].Add(1)
	} else {
		s.methods[6].Add(1)
	}
	if c := status / 100; c >= 1 && c <= 5 {
		s.statuses[c].Add(1)
	}
}

// statusRecorder remembers the status a handler wrote, and keeps the
// answer's writes bounded: each waits at most settee/io_timeout for the
// client to take its bytes (a client that stops reading ends its
// connection, instead of holding the handler and its answer for ever).
type statusRecorder struct {
	http.ResponseWriter
	status int
	// expose, for a CORS request from an accepted origin, is the headers
	// listed in Access-Control-Expose-Headers beside the simple ones the
	// response has when it is sent (cors.go)
	expose []string
	// io is the write bound; set is when the deadline was last moved (it
	// is moved at most once a second: a streamed answer writes often)
	io  time.Duration
	set time.Time
	rc  *http.ResponseController
}

// deadline moves the connection's write deadline io past now.
func (w *statusRecorder) deadline() {
	if w.io <= 0 {
		return
	}
	now := time.Now()
	if now.Sub(w.set) < time.Second {
		return
	}
	w.set = now
	if w.rc == nil {
		w.rc = http.NewResponseController(w.ResponseWriter)
	}
	_ = w.rc.SetWriteDeadline(now.Add(w.io))
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		if w.expose != nil {
			exposeHeaders(w.Header(), w.expose)
		}
	}
	w.deadline()
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(200)
	}
	w.deadline()
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush keeps streamed feeds streaming through the recorder.
func (w *statusRecorder) Flush() {
	w.deadline()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func counter(v int64, desc string) map[string]any {
	return map[string]any{"value": v, "type": "counter", "desc": desc}
}

func (g *Gateway) handleStats(rq *req) error {
	s := &g.stats
	methods := map[string]any{}
	for name, i := range methodIdx {
		methods[name] = counter(s.methods[i].Load(), "number of HTTP "+name+" requests")
	}
	statuses := map[string]any{}
	for c := 1; c <= 5; c++ {
		statuses[string(rune('0'+c))+"xx"] = counter(s.statuses[c].Load(), "responses with a status in this class")
	}
	dbs := len(g.dbs.AllDBs(rq.ctx))
	return g.writeJSON(rq, 200, map[string]any{"couchdb": map[string]any{
		"httpd":                    map[string]any{"requests": counter(s.requests.Load(), "number of HTTP requests")},
		"httpd_request_methods":    methods,
		"httpd_status_codes":       statuses,
		"open_databases":           map[string]any{"value": dbs, "type": "gauge", "desc": "number of databases"},
		"request_time_since_start": map[string]any{"value": time.Since(s.start).Seconds(), "type": "gauge", "desc": "seconds since the node started"},
	}})
}

func (g *Gateway) handleSystem(rq *req) error {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	// what the node's limits hold now (docs/security.md, "What limits
	// protect the node")
	limits := map[string]any{"request_body_bytes": g.bodies.held.Load()}
	if g.cfg.Connections != nil {
		open, refused := g.cfg.Connections()
		limits["connections"], limits["connections_refused"] = open, refused
	}
	return g.writeJSON(rq, 200, map[string]any{
		"limits":            limits,
		"uptime":            int64(time.Since(g.stats.start).Seconds()),
		"memory":            map[string]any{"total": m.Sys, "heap": m.HeapAlloc, "heap_sys": m.HeapSys, "stacks": m.StackSys},
		"goroutines":        runtime.NumGoroutine(),
		"gc_count":          m.NumGC,
		"gc_pause_total_ns": m.PauseTotalNs,
		"cpus":              runtime.NumCPU(),
	})
}

func (g *Gateway) handleVersions(rq *req) error {
	deps := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch {
			case strings.Contains(d.Path, "protoactor-go"), strings.Contains(d.Path, "badger"), d.Path == "google.golang.org/protobuf", d.Path == "google.golang.org/grpc":
				deps[d.Path] = d.Version
			}
		}
	}
	return g.writeJSON(rq, 200, map[string]any{
		"settee":       map[string]string{"version": g.cfg.Version, "git_sha": g.cfg.GitSHA},
		"go":           runtime.Version(),
		"dependencies": deps,
	})
}

// proxyNode forwards /_node/<name>/... to the member of that name, with the
// client's credentials: every node answers for every other.
func (g *Gateway) proxyNode(rq *req, name string) error {
	if name == "nonode@nohost" {
		// Erlang's name for a node without distribution: CouchDB knows the
		// name, so it answers as for a node that is down
		return errNodeDown(name)
	}
	if g.cfg.Cluster == nil {
		return errNoSuchNode(name)
	}
	r, err := g.cfg.Cluster.Members(rq.ctx)
	if err != nil {
		return err
	}
	for _, m := range r.Members {
		if m.Name != name || m.Removed {
			continue
		}
		if m.HttpAddr == "" {
			return errNodeDown(name)
		}
		target := &url.URL{Scheme: "http", Host: m.HttpAddr}
		p := httputil.NewSingleHostReverseProxy(target)
		p.ErrorHandler = func(_ http.ResponseWriter, _ *http.Request, err error) {
			g.log.Warn("node request not answered", "node", name, "err", err)
			g.fail(rq, errNodeDown(name))
		}
		out := rq.r.Clone(rq.ctx)
		// the other node sees the request as for itself
		// (segments escaped again: a _config key may hold a "/")
		esc := make([]string, 0, len(rq.segs)-2)
		for _, s := range rq.segs[2:] {
			esc = append(esc, couchpath.Escape(s))
		}
		self := "_local"
		if len(esc) == 0 {
			self = couchpath.Escape(name) // its welcome, not its name
		}
		raw := strings.TrimSuffix("/_node/"+self+"/"+strings.Join(esc, "/"), "/")
		out.URL.Path = strings.TrimSuffix("/_node/"+name+"/"+strings.Join(rq.segs[2:], "/"), "/")
		if len(esc) != 0 {
			out.URL.Path = strings.TrimSuffix("/_node/_local/"+strings.Join(rq.segs[2:], "/"), "/")
		}
		out.URL.RawPath = raw
		signForNode(g.cfg.NodeKey, out, rq.user, time.Now())
		p.ServeHTTP(rq.w, out)
		return nil
	}
	return errNoSuchNode(name)
}

// CouchDB's answers for /_node/<name>/... naming a node that is not a
// member, and one that is but does not answer (chttpd_node's call_node).
func errNoSuchNode(name string) error { return newErr(404, "not_found", "no such node: "+name) }
func errNodeDown(name string) error   { return newErr(412, "nodedown", name+" is down") }
