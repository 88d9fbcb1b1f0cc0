// Command getbound measures what bounds a sequential doc GET on this
// machine (issue 20's "GET ≥ 90% of a bare server"): one client on one
// keep-alive connection sends random GETs of medium docs (~14.6 KB) to
// five servers, each a process of its own, in turns:
//
//   - bare: net/http answering the same fixed bytes to every GET (what
//     settee bench reports as the GET ceiling);
//   - store: a minimal store server, each GET one badger lookup of the
//     doc's JSON by its id and one copy out (no authentication, rev
//     trees, shards, actors or headers beyond Content-Type and -Length),
//     the least any server that keeps its docs in badger does;
//   - couch: the least a server does that answers a GET as CouchDB does
//     over a store like settee's (couchHandler): Basic credentials checked
//     against a cache, the doc's record and then its winner's body (two
//     lookups), _id and _rev rendered in, CouchDB's headers, the answer
//     sent in one write (onewrite, as settee does);
//   - couch1: couch over one record per doc (its winner's rev and body
//     together), a GET in one lookup;
//   - settee: the server at --url, the same docs in a database of its own.
//
// Usage:
//
//	go run ./scripts/getbound --url http://admin:pw@127.0.0.1:5984 [--docs 20000 --gets 30000 --rounds 2 --turns 20 --pid PID]
//
// In a round the five take turns (--turns, each a share of --gets), so a
// drift of the machine's pace over seconds reaches each alike. It prints
// GETs/s of each server per round and each one's ratio to bare, and each
// server's CPU time per GET (settee's with --pid).
package main

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	_ "net/http/pprof" // a child's profile with GETBOUND_PPROF
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/onewrite"
)

// couchAuth is the couch child's one login (admin:pw).
var couchAuth = "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:pw"))

// serveEnv names, in a server child's environment, what it serves.
const serveEnv = "GETBOUND_SERVE"

func main() {
	if kind := os.Getenv(serveEnv); kind != "" {
		if err := serveChild(kind, os.Getenv("GETBOUND_DOCS")); err != nil {
			log.Fatal(err)
		}
		return
	}
	target := flag.String("url", "http://admin:admin@127.0.0.1:5984", "settee's URL, with credentials")
	docs := flag.Int("docs", 20000, "docs in each store")
	gets := flag.Int("gets", 30000, "GETs per server per round")
	rounds := flag.Int("rounds", 2, "rounds (bare, store, settee each)")
	turns := flag.Int("turns", 20, "turns each server takes in a round, the GETs split between them")
	pid := flag.Int("pid", 0, "settee's process id, to report its CPU time per GET beside the others' (Linux)")
	flag.Parse()
	if err := run(*target, *docs, *gets, *rounds, max(*turns, 1), *pid); err != nil {
		log.Fatal(err)
	}
}

// doc is the JSON of doc i: about 14.6 KB, as settee bench's medium docs.
func doc(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	pad := make([]byte, 14500)
	for j := range pad {
		pad[j] = 'a' + byte(r.IntN(26))
	}
	return fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, i, pad)
}

func docID(i int) string { return fmt.Sprintf("d%08d", i) }

func run(target string, docs, gets, rounds, turns, setteePID int) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	auth := ""
	if u.User != nil {
		pw, _ := u.User.Password()
		auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))
		u.User = nil
	}
	db := fmt.Sprintf("getbound-%d", time.Now().UnixNano())
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, DisableCompression: true}}
	if err := loadSettee(hc, u.String(), auth, db, docs); err != nil {
		return err
	}
	defer func() {
		req, _ := http.NewRequest("DELETE", u.String()+"/"+db, nil)
		req.Header.Set("Authorization", auth)
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	type server struct {
		name, base, auth string
		pid              int
	}
	var servers []server
	for _, kind := range []string{"bare", "store", "couch", "couch1"} {
		ch, err := startChild(kind, docs)
		if err != nil {
			return err
		}
		defer ch.stop()
		a := ""
		if strings.HasPrefix(kind, "couch") {
			a = couchAuth
		}
		servers = append(servers, server{kind, "http://" + ch.addr, a, ch.cmd.Process.Pid})
	}
	servers = append(servers, server{"settee", u.String() + "/" + db, auth, setteePID})
	fmt.Printf("%d docs of %d bytes, %d GETs per server per round in %d turns each, one client, one connection\n", docs, len(doc(0)), gets, turns)
	// a load leaves work behind (memtable flushes, compactions): the
	// first round would pay for it, settee's most, and count its CPU as
	// the GETs'
	for _, sv := range servers {
		settle(sv.pid, time.Minute)
	}
	rngs := make([]*rand.Rand, len(servers))
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(1, uint64(i)))
	}
	for r := 1; r <= rounds; r++ {
		// the servers take turns of gets/turns GETs: the machine's pace
		// drifts over seconds, and each server gets the same share of it
		res := make([]result, len(servers))
		for t := range turns {
			n := gets / turns
			if t == turns-1 {
				n = gets - n*(turns-1)
			}
			for i, sv := range servers {
				if err := res[i].add(hc, sv.base, sv.auth, docs, n, sv.pid, rngs[i]); err != nil {
					return fmt.Errorf("%s: %w", sv.name, err)
				}
			}
		}
		b, s, c, c1, t := res[0], res[1], res[2], res[3], res[4]
		fmt.Printf("round %d: bare %.0f GET/s%s; store %.0f GET/s%s (%.2f of bare); couch %.0f GET/s%s (%.2f of bare); couch1 %.0f GET/s%s (%.2f of bare); settee %.0f GET/s%s (%.2f of bare, %.2f of store, %.2f of couch)\n",
			r, b.rate(), b.cpu(), s.rate(), s.cpu(), s.rate()/b.rate(), c.rate(), c.cpu(), c.rate()/b.rate(), c1.rate(), c1.cpu(), c1.rate()/b.rate(),
			t.rate(), t.cpu(), t.rate()/b.rate(), t.rate()/s.rate(), t.rate()/c.rate())
	}
	return nil
}

func loadSettee(hc *http.Client, base, auth, db string, docs int) error {
	do := func(method, path string, body []byte) error {
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return nil
	}
	if err := do("PUT", "/"+db, nil); err != nil {
		return err
	}
	for start := 0; start < docs; start += 500 {
		var b bytes.Buffer
		b.WriteString(`{"docs":[`)
		for i := start; i < min(start+500, docs); i++ {
			if i > start {
				b.WriteByte(',')
			}
			d := doc(i)
			fmt.Fprintf(&b, `{"_id":%q,`, docID(i))
			b.Write(d[1:])
		}
		b.WriteString(`]}`)
		if err := do("POST", "/"+db+"/_bulk_docs", b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// result is one server's GETs, the time they took and, when its process
// is known, the CPU time the server spent on them.
type result struct {
	gets   int
	took   time.Duration
	cpuUse time.Duration
	cpuOK  bool
}

func (r result) rate() float64 { return float64(r.gets) / r.took.Seconds() }

func (r result) cpu() string {
	if !r.cpuOK || r.gets == 0 {
		return ""
	}
	return fmt.Sprintf(" [%.1f us CPU/GET]", float64(r.cpuUse)/float64(r.gets)/float64(time.Microsecond))
}

// add runs gets GETs and adds them to r, with pid's CPU time around them.
func (r *result) add(hc *http.Client, base, auth string, docs, gets, pid int, rng *rand.Rand) error {
	before, ok := cpuTime(pid)
	start := time.Now()
	if err := getLoop(hc, base, auth, docs, gets, rng); err != nil {
		return err
	}
	r.took += time.Since(start)
	after, ok2 := cpuTime(pid)
	if r.gets == 0 {
		r.cpuOK = ok && ok2
	}
	r.cpuOK = r.cpuOK && ok && ok2
	r.cpuUse += after - before
	r.gets += gets
	return nil
}

// settle waits, at most max, until pid spends under 5% of a CPU over a
// second (an unknown pid is settled).
func settle(pid int, max time.Duration) {
	for end := time.Now().Add(max); time.Now().Before(end); {
		a, ok := cpuTime(pid)
		time.Sleep(time.Second)
		b, ok2 := cpuTime(pid)
		if !ok || !ok2 || b-a < 50*time.Millisecond {
			return
		}
	}
}

// cpuTime is pid's user and system time from /proc.
func cpuTime(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// fields after the command's closing parenthesis; utime and stime
	// are the 14th and 15th fields of the line, in clock ticks (100/s)
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}

// getLoop sends gets GETs of random docs, one at a time.
func getLoop(hc *http.Client, base, auth string, docs, gets int, r *rand.Rand) error {
	buf := make([]byte, 64<<10)
	for range gets {
		req, err := http.NewRequest("GET", base+"/"+docID(r.IntN(docs)), nil)
		if err != nil {
			return err
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		n := 0
		for {
			k, err := resp.Body.Read(buf)
			n += k
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || n < 14000 {
			return fmt.Errorf("GET: %d, %d bytes", resp.StatusCode, n)
		}
	}
	return nil
}

type child struct {
	addr string
	cmd  *exec.Cmd
	in   io.WriteCloser
}

func (c *child) stop() {
	_ = c.in.Close()
	_ = c.cmd.Wait()
}

// startChild runs this program again as a server of kind, in a process of
// its own (a server in the client's process answers faster than any
// other process could).
func startChild(kind string, docs int) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), serveEnv+"="+kind, "GETBOUND_DOCS="+strconv.Itoa(docs))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = in.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s server: %w", kind, err)
	}
	return &child{addr: strings.TrimSpace(line), cmd: cmd, in: in}, nil
}

// serveChild serves kind on a random loopback port, prints the address
// and serves until standard input closes.
func serveChild(kind, docsArg string) error {
	docs, err := strconv.Atoi(docsArg)
	if err != nil {
		return err
	}
	var h http.Handler
	wrap := false // onewrite's listener and ConnContext, as settee's node
	switch kind {
	case "bare":
		body := append(doc(0), '\n')
		h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body)
		})
	case "store":
		db, done, err := openStore(docs, func(wb *badger.WriteBatch, i int) error {
			return wb.Set([]byte(docID(i)), doc(i))
		})
		if err != nil {
			return err
		}
		defer done()
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var out []byte
			err := db.View(func(txn *badger.Txn) error {
				item, err := txn.Get([]byte(strings.TrimPrefix(r.URL.Path, "/")))
				if err != nil {
					return err
				}
				out, err = item.ValueCopy(make([]byte, 0, item.ValueSize()+1))
				return err
			})
			if err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
			out = append(out, '\n')
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(out)))
			_, _ = w.Write(out)
		})
	case "couch":
		db, done, err := openStore(docs, func(wb *badger.WriteBatch, i int) error {
			rev := couchRev(i)
			// the doc's record: its winner's rev among some bytes, as a
			// small rev tree; then its body under id and rev
			if err := wb.Set([]byte("i"+docID(i)), append([]byte(rev), make([]byte, 64)...)); err != nil {
				return err
			}
			return wb.Set([]byte("b"+docID(i)+"\x00"+rev), doc(i))
		})
		if err != nil {
			return err
		}
		defer done()
		h = couchHandler(db, false)
		wrap = true
	case "couch1":
		db, done, err := openStore(docs, func(wb *badger.WriteBatch, i int) error {
			// one record: the winner's rev, then its body
			return wb.Set([]byte("d"+docID(i)), append([]byte(couchRev(i)+"\x00"), doc(i)...))
		})
		if err != nil {
			return err
		}
		defer done()
		h = couchHandler(db, true)
		wrap = true
	default:
		return fmt.Errorf("unknown server %q", kind)
	}
	if addr := os.Getenv("GETBOUND_PPROF_" + strings.ToUpper(kind)); addr != "" {
		// GETBOUND_PPROF_BARE / _STORE: this child's net/http/pprof, to
		// compare its profile with settee's
		go func() { log.Print(http.ListenAndServe(addr, nil)) }()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	addr := ln.Addr().String()
	if wrap {
		srv.ConnContext = onewrite.ConnContext
		ln = onewrite.Listen(ln)
	}
	go func() { _ = srv.Serve(ln) }()
	if _, err := fmt.Println(addr); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

// openStore opens a badger store in a temporary directory with settee's
// badger options where they matter to a read (bodies in the value log,
// synced writes) and writes each doc with put; done closes and removes it.
func openStore(docs int, put func(*badger.WriteBatch, int) error) (*badger.DB, func(), error) {
	dir, err := os.MkdirTemp("", "getbound")
	if err != nil {
		return nil, nil, err
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil).WithValueThreshold(1024).WithSyncWrites(true))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	done := func() {
		_ = db.Close()
		_ = os.RemoveAll(dir)
	}
	for start := 0; start < docs; start += 500 {
		wb := db.NewWriteBatch()
		for i := start; i < min(start+500, docs); i++ {
			if err := put(wb, i); err != nil {
				done()
				return nil, nil, err
			}
		}
		if err := wb.Flush(); err != nil {
			done()
			return nil, nil, err
		}
	}
	return db, done, nil
}

func couchRev(i int) string {
	sum := sha256.Sum256([]byte(docID(i)))
	return "1-" + hex.EncodeToString(sum[:16])
}

// couchHandler answers a doc GET with the least of what settee does for
// one: Basic credentials checked against a cache keyed by a SHA-256 of
// them, a timeout context, the doc's record read for its winner and then
// the winner's body (two lookups in one snapshot), the body rendered with
// _id and _rev into a new buffer, CouchDB's headers (Server,
// Cache-Control, X-Couch-Request-Id, Etag) and the answer held to leave
// in one write (onewrite). No rev trees, shards, actors, routing or
// metrics.
//
// With oneLookup the store keeps one record per doc, its winner's rev and
// body together (couch1): what a layout that reads a GET in one lookup
// would reach.
func couchHandler(db *badger.DB, oneLookup bool) http.Handler {
	secret := []byte("getbound")
	key := func(name, pw string) [32]byte {
		return sha256.Sum256([]byte(string(secret) + name + "\x00" + pw))
	}
	var mu sync.Mutex
	logins := map[[32]byte]bool{key("admin", "pw"): true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		raw, err := base64.StdEncoding.DecodeString(cred)
		name, pw, _ := strings.Cut(string(raw), ":")
		mu.Lock()
		ok := err == nil && scheme == "Basic" && logins[key(name, pw)]
		mu.Unlock()
		if !ok {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		id := strings.TrimPrefix(r.URL.Path, "/")
		var out []byte
		var rev string
		err = db.View(func(txn *badger.Txn) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var item *badger.Item
			if oneLookup {
				var err error
				if item, err = txn.Get([]byte("d" + id)); err != nil {
					return err
				}
			} else {
				rec, err := txn.Get([]byte("i" + id))
				if err != nil {
					return err
				}
				info, err := rec.ValueCopy(nil)
				if err != nil {
					return err
				}
				rev, _, _ = strings.Cut(string(info), "\x00")
				if item, err = txn.Get([]byte("b" + id + "\x00" + rev)); err != nil {
					return err
				}
			}
			return item.Value(func(v []byte) error {
				if oneLookup {
					r, body, _ := bytes.Cut(v, []byte{0})
					rev, v = string(r), body
				}
				out = make([]byte, 0, len(v)+len(id)+len(rev)+32)
				out = append(out, `{"_id":"`...)
				out = append(out, id...)
				out = append(out, `","_rev":"`...)
				out = append(out, rev...)
				out = append(out, `",`...)
				out = append(out, v[1:]...)
				out = append(out, '\n')
				return nil
			})
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		var rid [5]byte
		_, _ = crand.Read(rid[:])
		h := w.Header()
		h.Set("Server", "getbound")
		h.Set("Cache-Control", "must-revalidate")
		h.Set("X-Couch-Request-Id", hex.EncodeToString(rid[:]))
		h.Set("Content-Type", "application/json")
		h.Set("Etag", `"`+rev+`"`)
		h.Set("Content-Length", strconv.Itoa(len(out)))
		if send := onewrite.Hold(r, len(out)); send != nil {
			defer func() { _ = send() }()
			_, _ = w.Write(out)
			w.(http.Flusher).Flush()
			return
		}
		_, _ = w.Write(out)
	})
}
