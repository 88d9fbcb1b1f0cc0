package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The flood workload (issue 35): a client's GETs of one doc are timed
// alone, then again while one local client floods the node with hostile
// connections: slow bodies (a byte a second), bodies announced at 4 GiB
// that never come, and gzip bombs (1 MB inflating to 1 GiB) sent again and
// again, a second apart, to the anonymous login and to a database anyone
// may write. A connection the node closes is opened again a second later. It
// reports the GETs' throughput and p99 in both runs and the node's
// resident memory at its highest (--server-pid; else the Go runtime's own
// count from /_node/_local/_system).

// WorkloadFlood names the flood workload (--workload).
const WorkloadFlood = "flood"

// FloodReaders is the flood workload's readers unless --readers says.
const FloodReaders = 8

// FloodResult is what the flood workload measures.
type FloodResult struct {
	URL                     string  `json:"url"`
	Hostile                 int     `json:"hostile_connections"`
	Readers                 int     `json:"readers"`
	Seconds                 float64 `json:"seconds_per_run"`
	AloneHz, AloneP99Ms     float64 `json:"-"`
	FloodHz, FloodP99Ms     float64 `json:"-"`
	Kept                    float64 `json:"throughput_kept"`
	MaxRSSMB                int64   `json:"max_rss_mb"`
	RSSFrom                 string  `json:"rss_from"`
	BombsSent, BombsRefused int64   `json:"-"`
	HostileOpened           int64   `json:"hostile_opened"`
	Errors                  int64   `json:"get_errors"`
}

// WriteText prints the result.
func (r *FloodResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "flood: %d hostile connections against %s; %d readers of one doc, %.0f s a run\n", r.Hostile, r.URL, r.Readers, r.Seconds)
	fmt.Fprintf(w, "  GETs alone:      %8.0f /s  p99 %7.2f ms\n", r.AloneHz, r.AloneP99Ms)
	fmt.Fprintf(w, "  GETs in a flood: %8.0f /s  p99 %7.2f ms  (%.0f%% of alone; %d errors)\n", r.FloodHz, r.FloodP99Ms, r.Kept*100, r.Errors)
	fmt.Fprintf(w, "  hostile connections opened %d; gzip bombs sent %d, answered 4xx/5xx %d\n", r.HostileOpened, r.BombsSent, r.BombsRefused)
	fmt.Fprintf(w, "  node RSS at its highest: %d MB (%s)\n", r.MaxRSSMB, r.RSSFrom)
}

// RunFlood runs the flood workload against cfg.URL.
func RunFlood(ctx context.Context, cfg Config, out, progOut io.Writer) (*FloodResult, error) {
	cfg = cfg.withDefaults()
	prog := &progress{w: progOut, every: cfg.ProgressEvery}
	readers := cfg.Readers
	hostile := cfg.Hostile
	if hostile <= 0 {
		hostile = 1000
	}
	period := cfg.FloodTime
	if period <= 0 {
		period = 10 * time.Second
	}
	c, err := newClient(cfg.URL, readers+4)
	if err != nil {
		return nil, err
	}
	defer c.close()
	u, _ := url.Parse(cfg.URL)
	res := &FloodResult{URL: c.display, Hostile: hostile, Readers: readers, Seconds: period.Seconds()}

	// a database the admin reads, and one anyone may write (the bombs'
	// target: an open database reads the bodies it is sent)
	for _, db := range []string{"flood_bench", "flood_open"} {
		_ = floodCall(ctx, c, http.MethodDelete, "/"+db, nil)
		if err := floodCall(ctx, c, http.MethodPut, "/"+db, nil); err != nil {
			return nil, err
		}
	}
	if err := floodCall(ctx, c, http.MethodPut, "/flood_bench/doc", []byte(`{"v":1}`)); err != nil {
		return nil, err
	}
	defer func() {
		for _, db := range []string{"flood_bench", "flood_open"} {
			_ = floodCall(context.WithoutCancel(ctx), c, http.MethodDelete, "/"+db, nil)
		}
	}()

	rss := newRSSWatch(c, cfg.ServerPID)
	res.RSSFrom = rss.from
	prog.printf("  GETs alone for %v\n", period)
	alone, errs := readFor(ctx, c, readers, period)
	res.AloneHz, res.AloneP99Ms = alone.hz, alone.p99
	res.Errors += errs

	fctx, stop := context.WithCancel(ctx)
	fl := &flood{addr: u.Host, bomb: gzipBomb()}
	var wg sync.WaitGroup
	for i := 0; i < hostile; i++ {
		wg.Go(func() { fl.attack(fctx, i%3) })
	}
	rctx, rstop := context.WithCancel(ctx)
	var rwg sync.WaitGroup
	rwg.Go(func() { rss.run(rctx) })
	time.Sleep(2 * time.Second) // the flood builds up
	prog.printf("  GETs in a flood of %d hostile connections for %v\n", hostile, period)
	flooded, errs := readFor(ctx, c, readers, period)
	res.FloodHz, res.FloodP99Ms = flooded.hz, flooded.p99
	res.Errors += errs
	stop()
	wg.Wait()
	rstop()
	rwg.Wait()
	res.MaxRSSMB = rss.max.Load() >> 20
	res.HostileOpened, res.BombsSent, res.BombsRefused = fl.opened.Load(), fl.bombs.Load(), fl.refused.Load()
	if res.AloneHz > 0 {
		res.Kept = round2(res.FloodHz / res.AloneHz)
	}
	return res, writeResult(out, cfg.JSON, res)
}

// floodCall sends a request that must succeed (2xx).
func floodCall(ctx context.Context, c *client, method, path string, body []byte) error {
	var buf bytes.Buffer
	st, err := c.roundTrip(ctx, method, path, "", body, &buf)
	if err != nil {
		return err
	}
	if st/100 != 2 {
		return statusError(method, path, st, buf.Bytes())
	}
	return nil
}

// readFor has readers GET one doc in a loop for d.
func readFor(ctx context.Context, c *client, readers int, d time.Duration) (stats, int64) {
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			var buf bytes.Buffer
			var mine []time.Duration
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t0 := time.Now()
				st, err := c.roundTrip(ctx, http.MethodGet, "/flood_bench/doc", "", nil, &buf)
				if err != nil || st != http.StatusOK {
					errs.Add(1)
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return summarize(int64(len(lat)), time.Since(start), lat), errs.Load()
}

// flood is the hostile client.
type flood struct {
	addr                   string
	bomb                   []byte
	opened, bombs, refused atomic.Int64
}

// attack runs one hostile connection of a kind until ctx ends, opening a
// new one whenever the node closes it.
func (f *flood) attack(ctx context.Context, kind int) {
	for ctx.Err() == nil {
		conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", f.addr)
		if err != nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		f.opened.Add(1)
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		switch kind {
		case 0: // a slow body: a byte a second
			fmt.Fprintf(conn, "POST /_session HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n")
			for ctx.Err() == nil {
				if _, err := conn.Write([]byte(" ")); err != nil {
					break
				}
				sleepCtx(ctx, time.Second)
			}
		case 1: // a body announced at 4 GiB, one byte sent
			fmt.Fprintf(conn, "PUT /flood_open/doc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4294967296\r\n\r\n{")
			_, _ = io.Copy(io.Discard, conn) // until the node lets go
		case 2: // gzip bombs, one after another on the connection
			br := bufio.NewReader(conn)
			for i := 0; ctx.Err() == nil; i++ {
				path := "/_session"
				if i%2 == 1 {
					path = "/flood_open/_bulk_docs"
				}
				fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", path, len(f.bomb))
				f.bombs.Add(1)
				if _, err := conn.Write(f.bomb); err != nil {
					break
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					break
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 400 {
					f.refused.Add(1)
				}
				if resp.Close {
					break
				}
				sleepCtx(ctx, time.Second)
			}
		}
		stop()
		conn.Close()
		// a connection the node closed is opened again a second later:
		// the flood is of connections held and bodies sent, paced as one
		// client's would be over a network; unpaced on loopback, it
		// measured the attacker's own CPU on this 2-core machine
		sleepCtx(ctx, time.Second)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// gzipBomb is 1,024 gzip members of one MiB of spaces each: about 1 MB
// that inflates to 1 GiB of JSON whitespace.
func gzipBomb() []byte {
	var one bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&one, gzip.BestCompression)
	_, _ = zw.Write(bytes.Repeat([]byte(" "), 1<<20))
	_ = zw.Close()
	return bytes.Repeat(one.Bytes(), 1024)
}

// rssWatch samples the node's resident memory.
type rssWatch struct {
	c    *client
	pid  int
	from string
	max  atomic.Int64
}

func newRSSWatch(c *client, pid int) *rssWatch {
	w := &rssWatch{c: c, pid: pid, from: "GET /_node/_local/_system memory.total (the Go runtime's)"}
	if pid > 0 {
		w.from = "/proc/" + strconv.Itoa(pid) + "/status VmRSS"
	}
	w.sample(context.Background())
	return w
}

func (w *rssWatch) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.sample(ctx)
		}
	}
}

func (w *rssWatch) sample(ctx context.Context) {
	var v int64
	if w.pid > 0 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(w.pid) + "/status")
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				v = kb << 10
			}
		}
	} else {
		var sys struct {
			Memory struct {
				Total int64 `json:"total"`
			} `json:"memory"`
		}
		if err := w.c.getJSON(ctx, "/_node/_local/_system", "", &sys); err != nil {
			return
		}
		v = sys.Memory.Total
	}
	for {
		m := w.max.Load()
		if v <= m || w.max.CompareAndSwap(m, v) {
			return
		}
	}
}
