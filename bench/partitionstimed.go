package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// build writes a design doc or an index (method, path, body), then sends
// the first queries together, at most q at a time, each until it answers
// 200: a 500 "timeout" is CouchDB giving up on the request while the build
// goes on, counted and sent again, as the views workload's build does. The
// time runs from before the write: CouchDB's background indexer may start
// on it. The first answers are not checked: the timed phases check theirs.
func (p *partitionsRun) build(ctx context.Context, method, path string, body []byte, first []pquery) (PartitionsBuild, error) {
	b := PartitionsBuild{Queries: len(first)}
	ctx, cancel := context.WithTimeout(ctx, buildCap)
	defer cancel()
	p.prog.printf("  %s %s, then %d first queries\n", method, path, len(first))
	var buf bytes.Buffer
	t0 := time.Now()
	st, err := p.c.roundTrip(ctx, method, path, "", body, &buf)
	if err != nil {
		return b, err
	}
	if st != http.StatusOK && st != http.StatusCreated && st != http.StatusAccepted {
		return b, statusError(method, path, st, buf.Bytes())
	}
	var (
		wg       sync.WaitGroup
		sem      = make(chan struct{}, max(1, p.cfg.Q))
		timeouts atomic.Int64
		errOnce  sync.Once
		firstErr error
		done     atomic.Int64
	)
	stop := p.prog.track("first queries", int64(len(first)), &done)
	for _, q := range first {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var buf bytes.Buffer
			for {
				st, err := p.c.roundTrip(ctx, q.method, q.path, q.query, q.body, &buf)
				if err == nil && st == http.StatusOK {
					done.Add(1)
					return
				}
				if err == nil && !isTimeout(st, buf.Bytes()) {
					err = statusError(q.method, q.path, st, buf.Bytes())
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				timeouts.Add(1)
				p.prog.printf("  %s: 500 timeout after %.1fs, asking again\n", q.path, time.Since(t0).Seconds())
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	stop()
	if firstErr != nil {
		return b, firstErr
	}
	b.Sec, b.Hz, b.Timeouts = round2(elapsed.Seconds()), round2(float64(p.cfg.Docs)/elapsed.Seconds()), int(timeouts.Load())
	return b, nil
}

// isTimeout reports a 500 whose error is "timeout".
func isTimeout(st int, b []byte) bool {
	var e struct {
		Error string `json:"error"`
	}
	return st == http.StatusInternalServerError && json.Unmarshal(b, &e) == nil && e.Error == "timeout"
}

// checkPlan asks _explain (beside the query's _find) which index q would
// use.
func (p *partitionsRun) checkPlan(ctx context.Context, q pquery, want string) error {
	path := q.path[:len(q.path)-len("_find")] + "_explain"
	var buf bytes.Buffer
	st, err := p.c.roundTrip(ctx, http.MethodPost, path, "", q.body, &buf)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return statusError(http.MethodPost, path, st, buf.Bytes())
	}
	return checkExplain(buf.Bytes(), q.body, want)
}

// timed sends the queries from Concurrency clients and checks each
// answer.
func (p *partitionsRun) timed(ctx context.Context, name string, qs []pquery, check func(pquery, []byte) (int, error)) (PartitionsSide, error) {
	n := len(qs)
	var (
		next     atomic.Int64
		done     atomic.Int64
		rows     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		lats     = make([][]time.Duration, p.cfg.Concurrency)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := p.prog.track(name, int64(n), &done)
	start := time.Now()
	for w := range p.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				q := qs[i]
				t0 := time.Now()
				st, err := p.c.roundTrip(ctx, q.method, q.path, q.query, q.body, &buf)
				lats[w] = append(lats[w], time.Since(t0))
				if err == nil && st != http.StatusOK {
					err = statusError(q.method, q.path, st, buf.Bytes())
				}
				if err == nil {
					var got int
					got, err = check(q, buf.Bytes())
					rows.Add(int64(got))
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("%s %s?%s %s: %w", q.method, q.path, q.query, q.body, err); cancel() })
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	if firstErr != nil {
		return PartitionsSide{}, firstErr
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	st := summarize(int64(n), elapsed, all)
	return PartitionsSide{Hz: st.hz, P50Ms: st.p50, P99Ms: st.p99, Sec: round2(st.sec), Rows: rows.Load()}, nil
}
