package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/settee/settee/docjson"
)

// The phases beyond fabric_bench's: the GET ceiling, one doc read by many
// clients, many clients writing small docs, and fabric_bench's own
// sequential adds beside the concurrent ones.

// getCeiling serves the bytes the server answered for paths[0] from a bare
// net/http server on 127.0.0.1 (a random port), in a child process when it
// can (ceiling.go), and sends it paths through getLoop from a client built
// as r.c is (the same credentials and URL prefix), as the get phase sent
// them to the server. What it measures bounds the get phase from above on
// this machine: the same client, the same bytes, a server that does
// nothing else.
func (r *runner) getCeiling(ctx context.Context, paths []string) error {
	resp, err := r.c.do(ctx, http.MethodGet, paths[0], "", nil)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("GET %s: reading response: %w", paths[0], err)
	}
	if resp.StatusCode != http.StatusOK {
		return statusError(http.MethodGet, paths[0], resp.StatusCode, body)
	}
	reply := &ceilingReply{Header: http.Header{}, Body: body}
	for _, k := range []string{"Content-Type", "Etag"} {
		if v := resp.Header.Values(k); len(v) > 0 {
			reply.Header[k] = v
		}
	}
	reply.Header.Set("Content-Length", strconv.Itoa(len(body)))
	srv, err := startCeiling(reply, r.prog)
	if err != nil {
		return fmt.Errorf("bench: GET ceiling: %w", err)
	}
	defer srv.stop()
	u, err := url.Parse(r.cfg.URL)
	if err != nil {
		return fmt.Errorf("%w: url: %w", ErrConfig, err)
	}
	u.Scheme, u.Host = "http", srv.addr
	c, err := newClient(u.String(), r.cfg.Concurrency)
	if err != nil {
		return err
	}
	defer c.close()
	r.prog.printf("  GET ceiling: a bare net/http server (%s) on %s answering %d bytes\n", srv.where, u.Host, len(body))
	st, err := getLoop(ctx, c, r.prog, "get ceiling", paths)
	if err != nil {
		return fmt.Errorf("bench: GET ceiling: %w", err)
	}
	res := r.res
	res.GetCeilingHz, res.GetCeilingP50Ms, res.GetCeilingP99Ms, res.GetCeilingSec = st.hz, st.p50, st.p99, st.sec
	res.GetCeilingBodyBytes, res.GetCeilingServer = len(body), srv.where
	if st.hz > 0 {
		res.GetCeilingRatio = math.Round(res.GetHz/st.hz*1000) / 1000
	}
	return nil
}

// hotReads GETs one doc the add phase wrote (the middle id) HotReads times
// from Readers clients at once; every answer must be a 200 with the doc's
// _id.
func (r *runner) hotReads(ctx context.Context) error {
	id := strconv.Itoa((r.cfg.Docs + 1) / 2)
	path := r.dbPath + "/" + id
	want := docjson.AppendString(nil, id)
	c, err := newClient(r.cfg.URL, r.cfg.Readers)
	if err != nil {
		return err
	}
	defer c.close()
	get := call{method: http.MethodGet, path: path}
	st, err := manyClients(ctx, c, r.prog, "hot read", r.cfg.Readers, r.cfg.HotReads,
		func(int, int) call { return get },
		func(_ call, status int, resp []byte) error {
			if status != http.StatusOK {
				return statusError(http.MethodGet, path, status, resp)
			}
			if got := rawDocID(resp); !bytes.Equal(got, want) {
				return fmt.Errorf("%w: GET %s: _id %s, want %s", ErrResponse, path, got, want)
			}
			return nil
		})
	if err != nil {
		return err
	}
	res := r.res
	res.HotReadDocID = id
	res.HotReadHz, res.HotReadP50Ms, res.HotReadP99Ms, res.HotReadSec = st.hz, st.p50, st.p99, st.sec
	return nil
}

// rawDocID returns the raw _id token (quotes included) of the JSON object b,
// or nil.
func rawDocID(b []byte) []byte {
	var id []byte
	docjson.Object(b, 0, func(key []byte, vs int) int {
		if string(key) != `"_id"` {
			return docjson.SkipValue(b, vs)
		}
		if e := docjson.SkipString(b, vs); vs < len(b) && b[vs] == '"' && e > 0 {
			id = b[vs:e]
		}
		return -1 // found: stop
	})
	return id
}

// manyWriters PUTs WriterDocs new small docs (fabric_bench's small shape,
// each with a random 128-bit id as its put_docs makes them) from Writers
// clients at once; every answer must be a 201 or 202 with ok and the id.
// Each client generates its docs as it goes (a few hundred bytes each).
func (r *runner) manyWriters(ctx context.Context) error {
	n := r.cfg.Writers
	gens := make([]*docGen, n)
	for w := range gens {
		g, err := newDocGen(DocSmall, uint64(w)+2)
		if err != nil {
			return err
		}
		gens[w] = g
	}
	c, err := newClient(r.cfg.URL, n)
	if err != nil {
		return err
	}
	defer c.close()
	var accepted atomic.Int64
	st, err := manyClients(ctx, c, r.prog, "many writers", n, r.cfg.WriterDocs,
		func(w, _ int) call {
			id := gens[w].randomID()
			// A fresh body per request: the transport may still hold a sent
			// body after RoundTrip returns.
			return call{method: http.MethodPut, path: r.dbPath + "/" + string(id), id: id,
				body: gens[w].appendDoc(make([]byte, 0, gens[w].docLen(len(id))), id, "")}
		},
		func(cl call, status int, resp []byte) error {
			if status != http.StatusCreated && status != http.StatusAccepted {
				return statusError(cl.method, cl.path, status, resp)
			}
			var ans struct {
				OK bool   `json:"ok"`
				ID string `json:"id"`
			}
			if err := json.Unmarshal(resp, &ans); err != nil || !ans.OK || ans.ID != string(cl.id) {
				return fmt.Errorf("%w: PUT %s: %d %s", ErrResponse, cl.path, status, bytes.TrimSpace(resp))
			}
			if status == http.StatusAccepted {
				accepted.Add(1)
			}
			return nil
		})
	if err != nil {
		return err
	}
	res := r.res
	res.WritersOK, res.WritersAccepted = r.cfg.WriterDocs-int(accepted.Load()), int(accepted.Load())
	res.WritersHz, res.WritersP50Ms, res.WritersP99Ms, res.WritersSec = st.hz, st.p50, st.p99, st.sec
	return nil
}

// seqAdds runs the add phase again with one _bulk_docs in flight
// (fabric_bench's own loop), into a database of its own created as the
// bench database was and deleted after, so that neither the concurrent add
// figure nor the phases that read the bench database see it.
func (r *runner) seqAdds(ctx context.Context) (err error) {
	cfg := r.cfg
	cfg.Concurrency = 1
	name := DBPrefix + strconv.FormatInt(time.Now().UnixMicro(), 10)
	seq := &runner{cfg: cfg, c: r.c, gen: r.gen, prog: r.prog, res: &Result{DB: name}, dbPath: "/" + name}
	if err := seq.createDB(ctx); err != nil {
		return err
	}
	r.res.SeqAddDB = name
	defer func() {
		if derr := seq.cleanUp(ctx); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	st, err := seq.addDocs(ctx)
	if err != nil {
		return err
	}
	var info dbInfo
	if err := r.c.getJSON(ctx, seq.dbPath, "", &info); err != nil {
		return err
	}
	if info.DocCount != int64(cfg.Docs) {
		return fmt.Errorf("%w: doc_count %d of %s after adding %d docs", ErrCount, info.DocCount, name, cfg.Docs)
	}
	res := r.res
	res.SeqAddOK, res.SeqAddAccepted = seq.res.AddOK, seq.res.AddAccepted
	res.SeqAddHz, res.SeqAddP50Ms, res.SeqAddP99Ms, res.SeqAddSec = st.hz, st.p50, st.p99, st.sec
	return nil
}

// call is one request of manyClients; id is the doc id a write names.
type call struct {
	method, path string
	body, id     []byte
}

// manyClients sends n requests from clients goroutines at once through c,
// which keeps a connection alive per client (newClient with clients
// connections): request i, sent by client w, is next(w, i), and check
// accepts its answer or fails the phase. Before the clock starts every
// client makes one GET / at the same time, so that the connections are
// open and the timed requests do not pay for the dials (ab -k over warm
// connections). The first failure cancels the others.
func manyClients(ctx context.Context, c *client, prog *progress, name string, clients, n int,
	next func(w, i int) call, check func(cl call, status int, resp []byte) error) (stats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		ticket   atomic.Int64
		done     atomic.Int64
		errOnce  sync.Once
		firstErr error
		warm     sync.WaitGroup
		wg       sync.WaitGroup
		ready    = make(chan struct{}) // all clients started: warm up at once
		start    = make(chan struct{}) // all warm: the clock starts
		lats     = make([][]time.Duration, clients)
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }
	warm.Add(clients)
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			<-ready
			st, err := c.roundTrip(ctx, http.MethodGet, "/", "", nil, &buf)
			if err == nil && st != http.StatusOK {
				err = statusError(http.MethodGet, "/", st, buf.Bytes())
			}
			warm.Done()
			if err != nil {
				fail(fmt.Errorf("%s: warming up: %w", name, err))
				return
			}
			<-start
			lat := make([]time.Duration, 0, n/clients+1)
			defer func() { lats[w] = lat }()
			for {
				i := int(ticket.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				cl := next(w, i)
				t0 := time.Now()
				st, err := c.roundTrip(ctx, cl.method, cl.path, "", cl.body, &buf)
				lat = append(lat, time.Since(t0))
				if err == nil {
					err = check(cl, st, buf.Bytes())
				}
				if err != nil {
					fail(err)
					return
				}
				done.Add(1)
			}
		}()
	}
	close(ready)
	warm.Wait()
	stop := prog.track(name, int64(n), &done)
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	stop()
	if firstErr != nil {
		return stats{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return stats{}, err
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	return summarize(done.Load(), elapsed, all), nil
}
