package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"
)

// The GET ceiling's server runs in a process of its own when it can: a
// server in the client's process answers about three times faster on this
// machine (15,000-17,000 GETs/s of 14.7 KB against 4,800-5,000 from a
// separate process, the same client and bytes: between goroutines of one
// runtime an answer needs no wake-up of another process), which no server
// under test, a process of its own, could approach. The child is this
// executable, started again with the same arguments and ceilingEnv naming
// a file with the bytes to serve; CeilingChild, called first thing, turns
// it into the server. Without that call the ceiling runs in-process.

// ceilingEnv names, in a ceiling server's environment, the file it serves.
const ceilingEnv = "SETTEE_BENCH_CEILING_SERVE"

// Values of Result.GetCeilingServer.
const (
	CeilingChildProcess = "child process"
	CeilingInProcess    = "in-process"
)

// childOK records that CeilingChild was called in this process (which is
// then no ceiling server): its executable, started again, serves.
var childOK atomic.Bool

// ceilingReply is what a ceiling server answers to every request.
type ceilingReply struct {
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"`
}

func (c *ceilingReply) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	for k, v := range c.Header {
		h[k] = v
	}
	_, _ = w.Write(c.Body)
}

// CeilingChild makes the GET ceiling's server of this process when Run
// started it as one: it then serves until its standard input closes and
// exits, never returning. Otherwise it returns at once, and from then on
// Run starts the ceiling's server as a child process of this executable,
// with the same arguments: call it first thing on the path those arguments
// take (settee calls it at the start of `settee bench`; a test binary, in
// TestMain).
func CeilingChild() {
	file := os.Getenv(ceilingEnv)
	if file == "" {
		childOK.Store(true)
		return
	}
	if err := serveCeilingChild(file, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: GET ceiling server: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveCeilingChild serves the reply in file on a random 127.0.0.1 port,
// writes "addr\n" to out once it listens, and returns when in ends.
func serveCeilingChild(file string, in io.Reader, out io.Writer) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var reply ceilingReply
	if err := json.Unmarshal(b, &reply); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: &reply, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	if _, err := fmt.Fprintln(out, ln.Addr().String()); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, in) // until the parent closes it, or dies
	return srv.Close()
}

// ceilingServer is a running ceiling server: its address and how to stop it.
type ceilingServer struct {
	addr  string
	where string // CeilingChildProcess or CeilingInProcess
	stop  func()
}

// startCeiling starts a server answering reply: a child process when
// CeilingChild was called, else (or when the child fails to start) one in
// this process.
func startCeiling(reply *ceilingReply, prog *progress) (*ceilingServer, error) {
	if childOK.Load() {
		s, err := startCeilingChild(reply)
		if err == nil {
			return s, nil
		}
		prog.printf("  GET ceiling: no child process (%v), serving in-process\n", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: reply, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	return &ceilingServer{addr: ln.Addr().String(), where: CeilingInProcess, stop: func() {
		_ = srv.Close()
		<-served
	}}, nil
}

func startCeilingChild(reply *ceilingReply) (*ceilingServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "settee-bench-ceiling-*.json")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name()) // read by the child before it answers its address
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Env = append(os.Environ(), ceilingEnv+"="+f.Name())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// A pipe of our own rather than StdoutPipe: Wait closes that one, and
	// it runs while the address is read.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		_ = stdout.Close()
		return nil, err
	}
	exited := make(chan struct{})
	stop := func() {
		_ = stdin.Close() // the child's signal to exit
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addr <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
		_ = stdout.Close()
	}()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case a := <-addr:
		if _, _, err := net.SplitHostPort(a); err != nil {
			stop()
			return nil, fmt.Errorf("child answered %q", a)
		}
		return &ceilingServer{addr: a, where: CeilingChildProcess, stop: stop}, nil
	case <-exited:
		return nil, errors.New("child exited before listening")
	case <-time.After(10 * time.Second):
		stop()
		return nil, errors.New("child did not listen within 10s")
	}
}
