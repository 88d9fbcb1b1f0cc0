// Package testbin builds the settee binary for the tests that run it as a
// process of its own (crashtest: kill -9 and restarts; resourcetest: its
// memory and its death are what is measured), once per test binary.
package testbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Builder builds ./cmd/settee at most once; its zero value builds without
// the race detector. A test package keeps one and calls Remove from its
// TestMain.
type Builder struct {
	// Race builds with -race (and cgo, which it needs).
	Race bool

	once sync.Once
	dir  string
	path string
	err  error
}

// Settee is the path of the built binary; the first call builds it, and a
// failed build fails every test that asks.
func (b *Builder) Settee(t testing.TB) string {
	t.Helper()
	b.once.Do(b.build)
	if b.err != nil {
		t.Fatalf("build settee: %v", b.err)
	}
	return b.path
}

// Remove deletes the built binary, if there is one.
func (b *Builder) Remove() {
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

func (b *Builder) build() {
	root, err := moduleRoot()
	if err != nil {
		b.err = err
		return
	}
	if b.dir, b.err = os.MkdirTemp("", "settee-testbin-"); b.err != nil {
		return
	}
	b.path = filepath.Join(b.dir, "settee")
	args := []string{"build", "-o", b.path}
	env := os.Environ()
	if b.Race {
		args = append(args, "-race")
	} else {
		env = append(env, "CGO_ENABLED=0") // as make build: a static binary
	}
	args = append(args, "./cmd/settee")
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = root, env
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.err = fmt.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), root, err, out)
		return
	}
	fmt.Fprintf(os.Stderr, "testbin: built settee in %v\n", time.Since(start).Round(time.Millisecond))
}

// moduleRoot is the directory holding go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		if p := strings.TrimSpace(string(out)); p != "" && p != os.DevNull {
			return filepath.Dir(p), nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}
