// Package testport picks loopback addresses for test servers that must be
// known before the server starts (a node address given to --join, a port
// kept across restarts).
//
// Listening on port 0 and closing the listener is not enough: the kernel
// hands the same port to the next bind(0) as readily as to anyone, and
// its ephemeral range is also where outgoing connections take their
// source ports, so a cluster's own connections can occupy a node's port
// before that node starts. Ports here come from below the ephemeral range
// and are never handed out twice in one test process.
package testport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Below Linux's default ephemeral range (32768-60999) and above the
// well-known and most registered service ports.
const (
	lowPort  = 10000
	highPort = 32000
)

// picked is process-wide on purpose: the point is that no two tests in
// this process get the same port.
var (
	mu     sync.Mutex
	picked = map[int]bool{}
)

// Addr returns a 127.0.0.1:port nobody listens on now, not in the
// ephemeral range and not returned before in this process.
func Addr(t testing.TB) string {
	t.Helper()
	lo, hi := lowPort, highPort
	if eLo := ephemeralLow(); eLo > lo+1000 && eLo <= hi {
		hi = eLo - 1
	}
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		p := lo + rand.IntN(hi-lo)
		if picked[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = ln.Close()
		picked[p] = true
		return ln.Addr().String()
	}
	t.Fatalf("testport: no free port in %d-%d after 1000 tries", lo, hi)
	return ""
}

// ephemeralLow reads the start of the kernel's ephemeral port range, or
// returns 0 where there is none to read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
}
