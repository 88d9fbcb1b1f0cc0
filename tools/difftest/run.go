package difftest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Target is one side: CouchDB or settee, one node or several.
type Target struct {
	// URLs are the nodes' base URLs, without credentials.
	URLs           []string
	User, Password string
}

// ParseTarget reads "http://user:pw@host:port[,http://...]".
func ParseTarget(s string) (Target, error) {
	var t Target
	for _, raw := range strings.Split(s, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil || u.Host == "" {
			return t, fmt.Errorf("target %q: want http://user:password@host:port", raw)
		}
		if u.User != nil {
			t.User = u.User.Username()
			t.Password, _ = u.User.Password()
		}
		t.URLs = append(t.URLs, u.Scheme+"://"+u.Host)
	}
	if t.User == "" {
		return t, fmt.Errorf("target %q: no admin credentials in the URL", s)
	}
	return t, nil
}

// Runner runs sequences on both targets.
type Runner struct {
	Couch, Settee Target
	// Client sends the requests; nil: one that follows no redirect and
	// does not decompress.
	Client *http.Client
	Logger *slog.Logger
	// Prefix starts the sequences' database names (default "dt-").
	Prefix string
	// Record, when not nil, gets each run sequence's CouchDB answers.
	Record map[string]*Recording
	// Replay, when not nil, answers for CouchDB: Couch is not asked, the
	// sequence's recording gives its answers (see Recording).
	Replay map[string]*Recording
}

// Result is one sequence's run.
type Result struct {
	Seq      string
	Requests int
	Diffs    []Diff
}

func (r *Runner) client() *http.Client {
	if r.Client != nil {
		return r.Client
	}
	r.Client = &http.Client{
		Transport:     &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       60 * time.Second,
	}
	return r.Client
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// side is one target's state during a sequence: the placeholder values.
type side struct {
	t    Target
	vars map[string]string
}

var dbNameRe = regexp.MustCompile(`[^a-z0-9_$()+-]`)

// DBNames are the {db} and {db2} of a sequence.
func (r *Runner) DBNames(seq string) (string, string) {
	p := r.Prefix
	if p == "" {
		p = "dt-"
	}
	db := p + dbNameRe.ReplaceAllString(strings.ToLower(seq), "-")
	return db, db + "-2"
}

// Run runs seq on both targets and compares every step's answers.
func (r *Runner) Run(ctx context.Context, seq Sequence) (Result, error) {
	db, db2 := r.DBNames(seq.Name)
	couch := r.Couch
	var replay *Recording
	if r.Replay != nil {
		if replay = r.Replay[seq.Name]; replay == nil || len(replay.Steps) != len(seq.Steps) {
			return Result{Seq: seq.Name}, fmt.Errorf("sequence %s: no recording of this version of it", seq.Name)
		}
		couch = Target{URLs: []string{replay.Base}}
	}
	var rec *Recording
	if r.Record != nil {
		rec = &Recording{Seq: seq.Name, Base: couch.URLs[0]}
		r.Record[seq.Name] = rec
	}
	sides := [2]*side{{t: couch}, {t: r.Settee}}
	for i, s := range sides {
		s.vars = map[string]string{"db": db, "db2": db2}
		if i == 0 && replay != nil {
			s.setNodes(replay.Nodes)
			continue
		}
		if err := r.nodeNames(ctx, s); err != nil {
			return Result{Seq: seq.Name}, err
		}
		if i == 0 && rec != nil {
			rec.Nodes = s.nodes()
		}
	}
	// the CouchDB side's answer to step i: asked, or replayed
	couchDo := func(st Step, i int) Answer {
		if replay != nil {
			return replay.Steps[i].answer(replay.Base)
		}
		return r.do(ctx, sides[0], st)
	}
	cmp := newComparer(couch.URLs, r.Settee.URLs)
	drop := func() {
		for _, s := range sides {
			if s == sides[0] && replay != nil {
				continue
			}
			for _, name := range []string{db, db2} {
				a := r.do(ctx, s, Step{Method: "DELETE", Path: "/" + url.PathEscape(name)})
				if a.Err != nil {
					r.logger().Warn("difftest: drop database", "db", name, "base", s.t.URLs[0], "err", a.Err)
				}
			}
		}
	}
	drop()
	res := Result{Seq: seq.Name}
	for i, st := range seq.Steps {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		ca := couchDo(st, i)
		sa := r.do(ctx, sides[1], st)
		if st.Retry > 0 && (st.Method == "GET" || st.Method == "HEAD") {
			ca, sa = r.retry(ctx, st, sides, ca, sa, func() Answer { return couchDo(st, i) })
		}
		if rec != nil {
			rec.Steps = append(rec.Steps, recordAnswer(ca))
		}
		res.Requests++
		cmp.cur = Diff{Seq: seq.Name, Step: i + 1, Name: st.Name, Method: st.Method, Path: st.Path}
		cmp.compare(st, ca, sa)
		for name, src := range st.Bind {
			sides[0].vars[name] = extract(ca, src)
			sides[1].vars[name] = extract(sa, src)
		}
		r.logger().Debug("difftest: step", "seq", seq.Name, "step", i+1, "method", st.Method, "path", st.Path,
			"couchdb", ca.Status, "settee", sa.Status)
	}
	for _, st := range seq.Cleanup {
		for _, s := range sides {
			if s == sides[0] && replay != nil {
				continue
			}
			r.do(ctx, s, st)
		}
	}
	drop()
	res.Diffs = cmp.diffs
	return res, nil
}

// retry asks each side again while its status differs from the other's
// and it is a 404 (or both are), until the step's Retry ms have passed.
func (r *Runner) retry(ctx context.Context, st Step, sides [2]*side, ca, sa Answer, couchDo func() Answer) (Answer, Answer) {
	deadline := time.Now().Add(time.Duration(st.Retry) * time.Millisecond)
	for ca.Status != sa.Status && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		if ca.Status == http.StatusNotFound || sa.Status != http.StatusNotFound {
			ca = couchDo()
		}
		if sa.Status == http.StatusNotFound || ca.Status != http.StatusNotFound {
			sa = r.do(ctx, sides[1], st)
		}
	}
	return ca, sa
}

// nodeNames binds {node1}.. to the side's node names (its /_membership).
func (r *Runner) nodeNames(ctx context.Context, s *side) error {
	a := r.do(ctx, s, Step{Method: "GET", Path: "/_membership"})
	if a.Err != nil {
		return fmt.Errorf("%s: %w", s.t.URLs[0], a.Err)
	}
	var m struct {
		ClusterNodes []string `json:"cluster_nodes"`
	}
	if a.Status != 200 || json.Unmarshal(a.Body, &m) != nil {
		return fmt.Errorf("%s/_membership: %d %s", s.t.URLs[0], a.Status, clip(string(a.Body)))
	}
	s.setNodes(m.ClusterNodes)
	return nil
}

func (s *side) setNodes(names []string) {
	for i, n := range names {
		s.vars[fmt.Sprintf("node%d", i+1)] = n
	}
}

func (s *side) nodes() []string {
	var out []string
	for i := 1; ; i++ {
		n, ok := s.vars[fmt.Sprintf("node%d", i)]
		if !ok {
			return out
		}
		out = append(out, n)
	}
}

var placeholderRe = regexp.MustCompile(`\{([A-Za-z][A-Za-z0-9_]*)\}`)

func (s *side) subst(in string, base string) string {
	return placeholderRe.ReplaceAllStringFunc(in, func(m string) string {
		name := m[1 : len(m)-1]
		if name == "base" {
			return base
		}
		if v, ok := s.vars[name]; ok {
			return v
		}
		return m
	})
}

// do sends one step to one side.
func (r *Runner) do(ctx context.Context, s *side, st Step) Answer {
	base := s.t.URLs[st.Node%len(s.t.URLs)]
	var body io.Reader
	var hasBody bool
	switch {
	case st.Raw != nil:
		body, hasBody = strings.NewReader(s.subst(*st.Raw, base)), true
	case st.Body != nil:
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(s.subst(string(st.Body), base))); err != nil {
			// a bound value broke the JSON: send it as it is
			compact.Reset()
			compact.WriteString(s.subst(string(st.Body), base))
		}
		body, hasBody = &compact, true
	}
	req, err := http.NewRequestWithContext(ctx, st.Method, base+s.subst(st.Path, base), body)
	if err != nil {
		return Answer{Err: err, Base: base}
	}
	// the path goes out as written: percent-encoding kept, JSON unencoded
	req.URL.Opaque = "//" + req.URL.Host + strings.SplitN(s.subst(st.Path, base), "?", 2)[0]
	req.Header.Set("Accept", "application/json")
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range st.Headers {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, s.subst(v, base))
	}
	switch {
	case st.As == "":
		req.SetBasicAuth(s.t.User, s.t.Password)
	case st.As == "none":
	default:
		u, p, _ := strings.Cut(s.subst(st.As, base), ":")
		req.SetBasicAuth(u, p)
	}
	resp, err := r.client().Do(req)
	if err != nil {
		return Answer{Err: err, Base: base}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return Answer{Err: err, Base: base}
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b, Base: base}
}

// extract reads a value to bind: "header:Name", "cookie:Name", or a JSON
// pointer into the body (a string's text, else the JSON).
func extract(a Answer, src string) string {
	if a.Err != nil {
		return ""
	}
	if h, ok := strings.CutPrefix(src, "header:"); ok {
		return a.Header.Get(h)
	}
	if name, ok := strings.CutPrefix(src, "cookie:"); ok {
		for _, c := range (&http.Response{Header: a.Header}).Cookies() {
			if c.Name == name {
				return c.Value
			}
		}
		return ""
	}
	v, err := decode(a.Body)
	if err != nil {
		return ""
	}
	for _, tok := range strings.Split(src, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return ""
			}
			v = x[i]
		default:
			return ""
		}
	}
	if s, ok := v.(string); ok {
		return s
	}
	if v == nil {
		return ""
	}
	return show(v)
}
