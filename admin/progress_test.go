package admin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/settee/settee/internal/testserver"
)

// runOnTerminal runs settee admin with stdout on a pseudo-terminal and
// returns everything the terminal received.
func runOnTerminal(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&got, ptmx) // ends with EIO once tty is closed and drained
	}()
	runErr := Run(context.Background(), args, tty)
	tty.Close()
	<-read
	return got.String(), runErr
}

// runOnPipe runs settee admin with stdout on a pipe, as in `settee admin … | cat`.
func runOnPipe(t *testing.T, args ...string) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&got, r)
	}()
	runErr := Run(context.Background(), args, w)
	w.Close()
	<-read
	return got.String(), runErr
}

// fill writes n small docs to db in one _bulk_docs.
func fill(t *testing.T, s *testserver.Server, db string, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"docs":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"_id":"d%05d","n":%d,"pad":"%s"}`, i, i, strings.Repeat("x", 100))
	}
	b.WriteString(`]}`)
	resp := s.Do(t, "POST", "/"+db+"/_bulk_docs", b.String())
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("_bulk_docs: %d", resp.StatusCode)
	}
}

// noBar fails when out holds what a progress bar draws: carriage
// returns, ANSI escapes or a percentage.
func noBar(t *testing.T, what, out string) {
	t.Helper()
	for _, c := range []string{"\r", "\x1b[", "%", "█"} {
		if strings.Contains(out, c) {
			t.Fatalf("%s on a pipe printed %q (a bar?): %q", what, c, out)
		}
	}
}

// TestProgressBarsOnlyOnATerminal: compact and one-shot replicate draw a
// bar when stdout is a terminal, and none on a pipe or with --json/--detach.
func TestProgressBarsOnlyOnATerminal(t *testing.T) {
	s := testserver.Start(t)
	u := adminURL(s, testserver.AdminUser, testserver.AdminPassword)
	if _, err := run(t, "--url", u, "db", "create", "bulky", "--q", "2"); err != nil {
		t.Fatal(err)
	}
	fill(t, s, "bulky", 300)

	t.Run("compact", func(t *testing.T) {
		out, err := runOnTerminal(t, "--url", u, "compact", "bulky")
		if err != nil {
			t.Fatalf("compact on a terminal: %v, output %q", err, out)
		}
		for _, want := range []string{"compacting bulky", "100%", "█", "compacted bulky in"} {
			if !strings.Contains(out, want) {
				t.Fatalf("compact on a terminal: no %q in %q", want, out)
			}
		}

		out, err = runOnPipe(t, "--url", u, "compact", "bulky")
		if err != nil || !strings.Contains(out, "compacted bulky in") {
			t.Fatalf("compact on a pipe: %q %v", out, err)
		}
		noBar(t, "compact", out)

		// --json and --detach draw no bar even on a terminal
		for _, args := range [][]string{{"--json", "compact", "bulky"}, {"compact", "bulky", "--detach"}} {
			out, err = runOnTerminal(t, append([]string{"--url", u}, args...)...)
			if err != nil || strings.Contains(out, "%") || strings.Contains(out, "compacting bulky") {
				t.Fatalf("%v on a terminal: %q %v", args, out, err)
			}
		}
	})

	t.Run("replicate", func(t *testing.T) {
		out, err := runOnTerminal(t, "--url", u, "replicate", "bulky", "copy1", "--create-target")
		if err != nil {
			t.Fatalf("replicate on a terminal: %v, output %q", err, out)
		}
		for _, want := range []string{"replicating bulky -> copy1", "100%", "(300/300)", "█", "replicated bulky -> copy1: docs_read=300 docs_written=300"} {
			if !strings.Contains(out, want) {
				t.Fatalf("replicate on a terminal: no %q in %q", want, out)
			}
		}

		// a URL endpoint is named without its credentials
		src := u + "/bulky"
		out, err = runOnTerminal(t, "--url", u, "replicate", src, "copy2", "--create-target")
		if err != nil {
			t.Fatalf("replicate from a URL on a terminal: %v, output %q", err, out)
		}
		if want := "replicating " + s.URL + "/bulky -> copy2"; !strings.Contains(out, want) || !strings.Contains(out, "(300/300)") {
			t.Fatalf("replicate from a URL on a terminal: no %q and (300/300) in %q", want, out)
		}
		if strings.Contains(strings.ReplaceAll(out, src, ""), testserver.AdminPassword) {
			t.Fatalf("the bar shows the password: %q", out)
		}

		out, err = runOnPipe(t, "--url", u, "replicate", "bulky", "copy3", "--create-target")
		if err != nil || !strings.Contains(out, "replicated bulky -> copy3: docs_read=300 docs_written=300") {
			t.Fatalf("replicate on a pipe: %q %v", out, err)
		}
		noBar(t, "replicate", out)

		// --json draws no bar even on a terminal
		out, err = runOnTerminal(t, "--url", u, "--json", "replicate", "bulky", "copy4", "--create-target")
		if err != nil || strings.Contains(out, "replicating bulky") || strings.Contains(out, "%") {
			t.Fatalf("replicate --json on a terminal: %q %v", out, err)
		}
	})
}
