// Package repbench is CouchDB's rep_bench.py workload: load a source
// database, replicate it through _replicator docs on a coordinator, time
// the replications until they complete, clean up. It uses only the public
// HTTP API, so it runs against settee and Apache CouchDB alike.
package repbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config is the benchmark's parameters.
type Config struct {
	SourceURL      string
	TargetURL      string
	CoordinatorURL string
	NDocs          int
	DocSize        int
	Jobs           int
	Batch          int
	Poll           time.Duration
	Timeout        time.Duration
	Keep           bool
}

// RegisterFlags binds the flags of settee repbench.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.SourceURL, "source-url", "http://admin:admin@127.0.0.1:15984", "source server URL (with credentials)")
	fs.StringVar(&c.TargetURL, "target-url", "http://admin:admin@127.0.0.1:25984", "target server URL (with credentials)")
	fs.StringVar(&c.CoordinatorURL, "coordinator-url", "", "server that runs the replications (default: the target)")
	fs.IntVar(&c.NDocs, "ndocs", 100000, "documents to load into the source")
	fs.IntVar(&c.DocSize, "doc-size", 2048, "approximate size of each document in bytes")
	fs.IntVar(&c.Jobs, "jobs", 1, "replications to run at once (each into its own target db)")
	fs.IntVar(&c.Batch, "batch", 500, "docs per _bulk_docs request when loading, and worker_batch_size")
	fs.DurationVar(&c.Poll, "poll", 250*time.Millisecond, "how often to poll the scheduler")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Minute, "give up after this long")
	fs.BoolVar(&c.Keep, "keep", false, "keep the databases and _replicator docs")
}

type server struct {
	base   string // no credentials, no trailing slash
	user   string
	pass   string
	client *http.Client
	withPw string // base with credentials, for replication endpoints
}

func newServer(raw string) (*server, error) {
	u, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("bad URL %q", raw)
	}
	s := &server{withPw: u.String(), client: &http.Client{Timeout: 10 * time.Minute}}
	if u.User != nil {
		s.user = u.User.Username()
		s.pass, _ = u.User.Password()
		u.User = nil
	}
	s.base = u.String()
	return s, nil
}

func (s *server) do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, r)
	if err != nil {
		return 0, err
	}
	if s.user != "" {
		req.SetBasicAuth(s.user, s.pass)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func (s *server) recreate(ctx context.Context, db string) error {
	if st, err := s.do(ctx, http.MethodDelete, "/"+db, nil, nil); err != nil && st != 404 {
		return err
	}
	_, err := s.do(ctx, http.MethodPut, "/"+db, nil, nil)
	return err
}

const (
	sourceDB = "rep_bench_source"
	targetDB = "rep_bench_target"
)

// JobResult is one replication's figures.
type JobResult struct {
	Elapsed      time.Duration
	DocsRead     int64
	DocsWritten  int64
	MissingFound int64
}

// Run runs the benchmark and prints as rep_bench.py does.
func Run(ctx context.Context, c Config, out io.Writer) ([]JobResult, error) {
	if c.CoordinatorURL == "" {
		c.CoordinatorURL = c.TargetURL
	}
	if c.Jobs < 1 || c.NDocs < 1 || c.Batch < 1 {
		return nil, errors.New("repbench: jobs, ndocs and batch must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	src, err := newServer(c.SourceURL)
	if err != nil {
		return nil, err
	}
	tgt, err := newServer(c.TargetURL)
	if err != nil {
		return nil, err
	}
	coord, err := newServer(c.CoordinatorURL)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "source: %s/%s\ntarget: %s (db prefix: %s)\ncoordinator: %s\ndocs: %d doc_size: %d n_jobs: %d\n",
		src.base, sourceDB, tgt.base, targetDB, coord.base, c.NDocs, c.DocSize, c.Jobs)

	ids := make([]string, c.Jobs)
	for i := range ids {
		ids[i] = fmt.Sprintf("rep_bench_%02d", i)
	}
	if !c.Keep {
		// what it created goes whichever way the run ends (a failed job, a
		// timeout, ^C), under a context of its own: ctx may be over
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			cleanup(cctx, src, tgt, coord, ids)
		}()
	}

	fmt.Fprintln(out, "== source ==")
	if err := src.recreate(ctx, sourceDB); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "loading %d docs into %s (doc_size=%d, batch=%d)...\n", c.NDocs, sourceDB, c.DocSize, c.Batch)
	t0 := time.Now()
	if err := load(ctx, src, c); err != nil {
		return nil, err
	}
	var info struct {
		Sizes struct {
			External int64 `json:"external"`
		} `json:"sizes"`
	}
	_, _ = src.do(ctx, http.MethodGet, "/"+sourceDB, nil, &info)
	ld := time.Since(t0)
	fmt.Fprintf(out, "loaded %d docs in %.1fs (%.0f docs/s), size %.1fMB\n", c.NDocs, ld.Seconds(),
		float64(c.NDocs)/ld.Seconds(), float64(info.Sizes.External)/1e6)

	fmt.Fprintln(out, "== bench ==")
	for i := range ids {
		if st, err := tgt.do(ctx, http.MethodDelete, "/"+targetName(i), nil, nil); err != nil && st != 404 {
			return nil, err
		}
		if err := deleteDoc(ctx, coord, "/_replicator/"+ids[i]); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	for i, id := range ids {
		doc, _ := json.Marshal(map[string]any{
			"source": src.withPw + "/" + sourceDB, "target": tgt.withPw + "/" + targetName(i),
			"create_target": true, "worker_batch_size": c.Batch,
		})
		if _, err := coord.do(ctx, http.MethodPut, "/_replicator/"+id, doc, nil); err != nil {
			return nil, err
		}
	}
	res := make([]JobResult, c.Jobs)
	done := make([]bool, c.Jobs)
	lastErr := make([]string, c.Jobs)
	left := c.Jobs
	for left > 0 {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("repbench: %d of %d replications not completed: %w", left, c.Jobs, ctx.Err())
		case <-time.After(c.Poll):
		}
		for i, id := range ids {
			if done[i] {
				continue
			}
			var d struct {
				State string          `json:"state"`
				Info  json.RawMessage `json:"info"`
			}
			if _, err := coord.do(ctx, http.MethodGet, "/_scheduler/docs/_replicator/"+id, nil, &d); err != nil {
				continue // the scheduler may not have seen the doc yet
			}
			switch d.State {
			case "completed":
				var st struct {
					DocsRead     int64 `json:"docs_read"`
					DocsWritten  int64 `json:"docs_written"`
					MissingFound int64 `json:"missing_revisions_found"`
				}
				_ = json.Unmarshal(d.Info, &st)
				res[i] = JobResult{Elapsed: time.Since(start), DocsRead: st.DocsRead, DocsWritten: st.DocsWritten, MissingFound: st.MissingFound}
				done[i] = true
				left--
			case "failed":
				return nil, fmt.Errorf("replication %s failed: %s", id, d.Info)
			case "crashing":
				// it retries with backoff; say why it is slow, once per error
				var info struct {
					Error string `json:"error"`
				}
				_ = json.Unmarshal(d.Info, &info)
				if info.Error != lastErr[i] {
					lastErr[i] = info.Error
					fmt.Fprintf(out, "job %02d crashing (retried): %s\n", i, info.Error)
				}
			}
		}
	}
	fmt.Fprintf(out, "wall=%.2fs\n", time.Since(start).Seconds())
	for i, r := range res {
		fmt.Fprintf(out, "job %02d elapsed=%6.2fs docs_read=%7d docs_written=%7d missing=%7d\n",
			i, r.Elapsed.Seconds(), r.DocsRead, r.DocsWritten, r.MissingFound)
	}
	return res, nil
}

func targetName(i int) string { return fmt.Sprintf("%s_%02d", targetDB, i) }

// cleanup deletes the _replicator docs first (stopping their jobs), then
// the databases; what is already gone is fine.
func cleanup(ctx context.Context, src, tgt, coord *server, ids []string) {
	for i, id := range ids {
		_ = deleteDoc(ctx, coord, "/_replicator/"+id)
		_, _ = tgt.do(ctx, http.MethodDelete, "/"+targetName(i), nil, nil)
	}
	_, _ = src.do(ctx, http.MethodDelete, "/"+sourceDB, nil, nil)
}

func deleteDoc(ctx context.Context, s *server, path string) error {
	var d struct {
		Rev string `json:"_rev"`
	}
	st, err := s.do(ctx, http.MethodGet, path, nil, &d)
	if st == 404 {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.do(ctx, http.MethodDelete, path+"?rev="+url.QueryEscape(d.Rev), nil, nil)
	return err
}

// load writes ndocs docs of about doc_size bytes in _bulk_docs batches.
func load(ctx context.Context, s *server, c Config) error {
	pad := max(c.DocSize-40, 1)
	filler := make([]byte, pad)
	for i := range filler {
		filler[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[i%36]
	}
	var buf bytes.Buffer
	for i := 0; i < c.NDocs; i += c.Batch {
		buf.Reset()
		buf.WriteString(`{"docs":[`)
		for j := i; j < min(i+c.Batch, c.NDocs); j++ {
			if j > i {
				buf.WriteByte(',')
			}
			// vary the start of the filler so docs differ
			k := j % pad
			fmt.Fprintf(&buf, `{"_id":"doc%08d","n":%d,"data":"%s%s"}`, j, j, filler[k:], filler[:k])
		}
		buf.WriteString("]}")
		if _, err := s.do(ctx, http.MethodPost, "/"+sourceDB+"/_bulk_docs", buf.Bytes(), nil); err != nil {
			return err
		}
	}
	return nil
}
