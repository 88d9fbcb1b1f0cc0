package resourcetest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/settee/settee/internal/testbin"
	"github.com/settee/settee/internal/testport"
)

const (
	adminUser, adminPass = "admin", "pw"
	// memoryMB is the node's --memory-mb; the suite holds its RSS under
	// that plus 256 MB, as the issue states the bound
	memoryMB = 256
	rssBound = (memoryMB + 256) << 20
	// answerWithin is how long /_up and a plain GET may take, throughout
	answerWithin = time.Second
)

// bin is ./cmd/settee built without -race: its memory is what is measured.
var bin testbin.Builder

func setteeBinary(t *testing.T) string { return bin.Settee(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	bin.Remove()
	os.Exit(code)
}

// node is a settee process under attack.
type node struct {
	t      *testing.T
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

func startNode(t *testing.T, extra ...string) *node {
	t.Helper()
	bin := setteeBinary(t)
	dir := t.TempDir()
	n := &node{t: t, addr: testport.Addr(t), exited: make(chan struct{}), log: filepath.Join(dir, "settee.log")}
	logf, err := os.Create(n.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	args := append([]string{"serve", "--data-dir", filepath.Join(dir, "data"), "--http", n.addr,
		"--admin", adminUser + ":" + adminPass, "--memory-mb", strconv.Itoa(memoryMB), "--log-level", "warn"}, extra...)
	n.cmd = exec.Command(bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		_ = n.cmd.Process.Kill()
		<-n.exited
		if t.Failed() {
			b, _ := os.ReadFile(n.log)
			if len(b) > 6000 {
				b = b[len(b)-6000:]
			}
			t.Logf("--- settee log ---\n%s", b)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if r, err := http.Get(n.url("/_up")); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				break
			}
		}
		if n.gone() || time.Now().After(deadline) {
			t.Fatalf("settee did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n
}

func (n *node) url(path string) string { return "http://" + n.addr + path }

func (n *node) adminURL(path string) string {
	return "http://" + adminUser + ":" + adminPass + "@" + n.addr + path
}

func (n *node) gone() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// rss is the process's resident memory in bytes.
func (n *node) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// do sends a request as the admin and answers status and body (0 and ""
// when there was no answer: the test has failed).
func (n *node) do(method, path, ctype string, body []byte) (int, string) {
	n.t.Helper()
	req, err := http.NewRequest(method, n.adminURL(path), bytes.NewReader(body))
	if err != nil {
		n.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	c := &http.Client{Timeout: 120 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		// Errorf, not Fatalf: cases call do from goroutines of their own
		n.t.Errorf("%s %s: %v", method, path, err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (n *node) must(method, path, ctype string, body []byte, want ...int) string {
	n.t.Helper()
	st, b := n.do(method, path, ctype, body)
	for _, w := range want {
		if st == w {
			return b
		}
	}
	n.t.Fatalf("%s %s: %d %s, want %v", method, path, st, b, want)
	return ""
}

// setConfig writes a _config value.
func (n *node) setConfig(section, key, value string) {
	n.t.Helper()
	n.must("PUT", "/_node/_local/_config/"+section+"/"+key, "application/json", []byte(strconv.Quote(value)), 200)
}

// watch probes the node while a case runs: every 100 ms a GET /_up and a
// GET of a plain doc, each of which must answer 200 within answerWithin,
// and the RSS, which must stay under rssBound. stop ends it and reports.
type watch struct {
	n      *node
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	fails  []string
	maxRSS int64
	slow   time.Duration
	probes int
}

func (n *node) watch() *watch {
	w := &watch{n: n, stop: make(chan struct{}), done: make(chan struct{})}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for first := true; ; first = false {
			if !first {
				select {
				case <-w.stop:
					return
				case <-tick.C:
				}
			}
			if n.gone() {
				w.fail("the node is gone")
				return
			}
			if r := n.rss(); r > w.maxRSS {
				w.mu.Lock()
				w.maxRSS = r
				w.mu.Unlock()
			}
			for _, p := range []string{n.url("/_up"), n.adminURL("/plain/doc")} {
				start := time.Now()
				resp, err := c.Get(p)
				took := time.Since(start)
				w.mu.Lock()
				w.probes++
				w.slow = max(w.slow, took)
				w.mu.Unlock()
				if err != nil {
					w.fail(fmt.Sprintf("GET %s: %v", p, err))
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					w.fail(fmt.Sprintf("GET %s: %d", p, resp.StatusCode))
				}
				if took > answerWithin {
					w.fail(fmt.Sprintf("GET %s took %v", p, took))
				}
			}
		}
	}()
	return w
}

func (w *watch) fail(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.fails) < 10 {
		w.fails = append(w.fails, time.Now().Format("15:04:05.000")+" "+s)
	}
}

// end stops the watch and fails the test for what it saw.
func (w *watch) end(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	if r := w.n.rss(); r > w.maxRSS {
		w.maxRSS = r
	}
	t.Logf("probes %d, slowest %v, max RSS %d MB", w.probes, w.slow.Round(time.Millisecond), w.maxRSS>>20)
	if w.n.gone() {
		t.Fatalf("the node died")
	}
	for _, f := range w.fails {
		t.Error(f)
	}
	if w.maxRSS > rssBound {
		t.Errorf("RSS reached %d MB, over the bound of %d MB", w.maxRSS>>20, rssBound>>20)
	}
	if w.probes == 0 {
		t.Errorf("no probe ran")
	}
}

// setup makes the database and doc the probes read.
func (n *node) setup() {
	n.must("PUT", "/plain", "", nil, 201, 412)
	n.must("PUT", "/plain/doc", "application/json", []byte(`{"v":1}`), 201, 409)
}
