package repbench_test

import (
	"bytes"
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/repbench"
)

func serverURL(s *testserver.Server, password string) string {
	u, _ := url.Parse(s.URL)
	u.User = url.UserPassword(testserver.AdminUser, password)
	return u.String()
}

func status(t *testing.T, s *testserver.Server, path string) int {
	t.Helper()
	resp := s.Do(t, "GET", path, nil)
	resp.Body.Close()
	return resp.StatusCode
}

// TestRepBench runs the benchmark between two real servers, the target
// coordinating: it prints the load rate, wall= and a line per job with
// every doc read, written and found missing, and leaves nothing behind.
func TestRepBench(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t), testserver.Start(t)
	var out bytes.Buffer
	cfg := repbench.Config{SourceURL: serverURL(a, testserver.AdminPassword), TargetURL: serverURL(b, testserver.AdminPassword),
		NDocs: 300, DocSize: 256, Jobs: 2, Batch: 100, Poll: 50 * time.Millisecond, Timeout: time.Minute}
	res, err := repbench.Run(context.Background(), cfg, &out)
	t.Logf("output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("results %v", res)
	}
	for _, r := range res {
		if r.DocsRead != 300 || r.DocsWritten != 300 || r.MissingFound != 300 || r.Elapsed <= 0 {
			t.Fatalf("result %+v", r)
		}
	}
	for _, re := range []string{
		`(?m)^loaded 300 docs in [0-9.]+s \([0-9]+ docs/s\)`,
		`(?m)^wall=[0-9.]+s$`,
		`(?m)^job 00 elapsed= *[0-9.]+s docs_read= *300 docs_written= *300 missing= *300$`,
		`(?m)^job 01 elapsed= *[0-9.]+s docs_read= *300 docs_written= *300 missing= *300$`,
	} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("output lacks %s", re)
		}
	}
	if strings.Contains(out.String(), testserver.AdminPassword) {
		t.Error("the output shows the password")
	}
	for _, c := range []struct {
		s    *testserver.Server
		path string
	}{
		{a, "/rep_bench_source"}, {b, "/rep_bench_target_00"}, {b, "/rep_bench_target_01"},
		{b, "/_replicator/rep_bench_00"}, {b, "/_replicator/rep_bench_01"},
	} {
		if st := status(t, c.s, c.path); st != 404 {
			t.Errorf("%s left behind (%d)", c.path, st)
		}
	}
}

// TestRepBenchCleansUpOnFailure: a run that fails after loading the source
// (here the target refuses the credentials) still deletes what it created.
func TestRepBenchCleansUpOnFailure(t *testing.T) {
	t.Parallel()
	a, b := testserver.Start(t), testserver.Start(t)
	cfg := repbench.Config{SourceURL: serverURL(a, testserver.AdminPassword), TargetURL: serverURL(b, "wrong"),
		NDocs: 50, DocSize: 100, Jobs: 1, Batch: 50, Poll: 50 * time.Millisecond, Timeout: time.Minute}
	var out bytes.Buffer
	if _, err := repbench.Run(context.Background(), cfg, &out); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("want a 401 from the target, got %v\n%s", err, out.String())
	}
	if st := status(t, a, "/rep_bench_source"); st != 404 {
		t.Fatalf("the source db is left behind (%d)", st)
	}
}
