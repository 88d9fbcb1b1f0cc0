package testport

import (
	"net"
	"strconv"
	"testing"
)

// TestAddrDistinctAndBindable: the addresses handed out are loopback,
// below the ephemeral range, never repeated, and free to listen on.
func TestAddrDistinctAndBindable(t *testing.T) {
	seen := map[string]bool{}
	eLo := ephemeralLow()
	for range 200 {
		a := Addr(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
		host, port, err := net.SplitHostPort(a)
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("address %q", a)
		}
		p, _ := strconv.Atoi(port)
		if p < lowPort || p >= highPort || (eLo > lowPort+1000 && p >= eLo) {
			t.Fatalf("port %d outside %d-%d (ephemeral range from %d)", p, lowPort, highPort, eLo)
		}
	}
	ln, err := net.Listen("tcp", Addr(t))
	if err != nil {
		t.Fatalf("listen on a picked address: %v", err)
	}
	ln.Close()
}
