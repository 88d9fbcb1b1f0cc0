package testcouch

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Restart kills the node (SIGKILL: a crash, not a shutdown) and starts it
// again on the same data dir, and returns once it answers /_up. start.sh
// wipes the data dir on every start, so the node is started here as
// start.sh starts it, from the files start.sh wrote: its vm.args and
// local.ini under the data dir and the unpacked release in the kit's
// cache ($SETTEE_COUCHDB_CACHE, else /var/tmp/settee-couchdb-3.5.2). t is
// skipped when those are not where start.sh puts them (another kit).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	cache := os.Getenv("SETTEE_COUCHDB_CACHE")
	if cache == "" {
		cache = "/var/tmp/settee-couchdb-3.5.2"
	}
	bin := filepath.Join(cache, "couchdb", "bin", "couchdb")
	args := filepath.Join(s.data, "etc", "vm.args")
	ini := filepath.Join(s.data, "etc", "local.ini")
	for _, f := range []string{bin, args, ini} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("cannot restart CouchDB with its data: %v", err)
		}
	}
	pidFile := filepath.Join(s.data, "couchdb.pid")
	if b, err := os.ReadFile(pidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for i := 0; i < 200 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(25 * time.Millisecond)
			}
		}
	}
	log, err := os.OpenFile(filepath.Join(s.data, "couchdb.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ERL_EPMD_ADDRESS=127.0.0.1", "COUCHDB_ARGS_FILE="+args,
		"COUCHDB_INI_FILES="+filepath.Join(cache, "couchdb", "etc", "default.ini")+" "+ini)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("restart CouchDB: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	// the node lives as long as the test that started it, not the
	// subtest that restarted it; stopped here (stop.sh, Start's cleanup,
	// then finds it gone)
	s.owner.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/_up", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("CouchDB exited on restart; see %s", filepath.Join(s.data, "couchdb.log"))
		case <-ctx.Done():
			t.Fatalf("CouchDB not up a minute after its restart; see %s", filepath.Join(s.data, "couchdb.log"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
