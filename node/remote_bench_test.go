package node

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

// BenchmarkRemoteRoundTrip is one request and its answer between two
// nodes' transports (gRPC over loopback, cluster secret checked): the
// least a read with r=2 adds to a local read, whatever the database does.
//
//	go test -run '^$' -bench RemoteRoundTrip ./node/
func BenchmarkRemoteRoundTrip(b *testing.B) {
	quiet := func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
	sysA := actor.NewActorSystem(actor.WithLoggerFactory(quiet))
	sysB := actor.NewActorSystem(actor.WithLoggerFactory(quiet))
	ra, _, err := startRemote(sysA, "127.0.0.1:0", "", "bench-secret")
	if err != nil {
		b.Fatal(err)
	}
	defer ra.Shutdown(false)
	rb, addrB, err := startRemote(sysB, "127.0.0.1:0", "", "bench-secret")
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Shutdown(false)
	if err := spawnEcho(sysB); err != nil {
		b.Fatal(err)
	}
	roundTrips(b, sysA, actor.NewPID(addrB, "echo"))
}

// echoDoc is a medium doc's body (14.5 KB, as settee bench's medium docs).
var echoDoc = []byte(`{"data":"` + strings.Repeat("x", 14500) + `"}`)

// spawnEcho starts the actor the round-trip benchmarks talk to: it
// answers a Ping with a Pong and a GetDoc with a medium doc.
func spawnEcho(sys *actor.ActorSystem) error {
	_, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *pb.Ping:
			c.Respond(&pb.Pong{From: m.From})
		case *pb.GetDoc:
			c.Respond(&pb.DocReply{Bodies: []*pb.RevBody{{Rev: "1-abc", Json: echoDoc}}})
		}
	}), "echo")
	return err
}

func roundTrips(b *testing.B, sys *actor.ActorSystem, pid *actor.PID) {
	ctx := context.Background()
	b.Run("small", func(b *testing.B) {
		for b.Loop() {
			if _, err := actors.Ask[*pb.Pong](ctx, sys.Root, pid, &pb.Ping{From: "a"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("doc-14.5KB", func(b *testing.B) {
		for b.Loop() {
			if _, err := actors.Ask[*pb.DocReply](ctx, sys.Root, pid, &pb.GetDoc{Id: "x"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRemoteRoundTripProcess is BenchmarkRemoteRoundTrip with the
// answering node in another process, as in a cluster of node processes on
// one machine: each round trip wakes threads of two processes, which the
// in-process benchmark does not pay.
//
//	go test -run '^$' -bench RemoteRoundTripProcess ./node/
func BenchmarkRemoteRoundTripProcess(b *testing.B) {
	quiet := func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
	addr := startPeerProcess(b, "TestEchoNodeProcess", "SETTEE_ECHO_NODE", "echo-node ")
	sys := actor.NewActorSystem(actor.WithLoggerFactory(quiet))
	r, _, err := startRemote(sys, "127.0.0.1:0", "", "bench-secret")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Shutdown(false)
	roundTrips(b, sys, actor.NewPID(addr, "echo"))
}

// TestEchoNodeProcess is BenchmarkRemoteRoundTripProcess's other node; it
// runs only in the process the benchmark starts, until killed.
func TestEchoNodeProcess(t *testing.T) {
	if os.Getenv("SETTEE_ECHO_NODE") == "" {
		t.Skip("the other process of BenchmarkRemoteRoundTripProcess")
	}
	quiet := func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
	sys := actor.NewActorSystem(actor.WithLoggerFactory(quiet))
	_, addr, err := startRemote(sys, "127.0.0.1:0", "", "bench-secret")
	if err != nil {
		t.Fatal(err)
	}
	if err := spawnEcho(sys); err != nil {
		t.Fatal(err)
	}
	fmt.Println("echo-node " + addr)
	select {}
}

// BenchmarkLoopbackRoundTripProcess is the floor under the two benchmarks
// above: one request and its answer between two processes over a bare
// loopback TCP connection (length-prefixed bytes, a 64-byte answer), no
// gRPC, no protoactor, no serialization. What it costs is the machine's:
// two syscalls on each side and the wake-up of the other process's thread.
// A read with r=2 pays at least this much more than a read with r=1.
//
//	go test -run '^$' -bench LoopbackRoundTripProcess ./node/
func BenchmarkLoopbackRoundTripProcess(b *testing.B) {
	addr := startPeerProcess(b, "TestLoopbackEchoProcess", "SETTEE_LOOPBACK_ECHO", "loopback-echo ")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for _, size := range []int{100, len(echoDoc)} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			msg := make([]byte, 4+size)
			binary.BigEndian.PutUint32(msg, uint32(size))
			ans := make([]byte, 64)
			for b.Loop() {
				if _, err := conn.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(conn, ans); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestLoopbackEchoProcess is BenchmarkLoopbackRoundTripProcess's other
// process; it runs only there, until killed.
func TestLoopbackEchoProcess(t *testing.T) {
	if os.Getenv("SETTEE_LOOPBACK_ECHO") == "" {
		t.Skip("the other process of BenchmarkLoopbackRoundTripProcess")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("loopback-echo " + ln.Addr().String())
	for {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			hdr := make([]byte, 4)
			ans := make([]byte, 64)
			for {
				if _, err := io.ReadFull(r, hdr); err != nil {
					return
				}
				if _, err := r.Discard(int(binary.BigEndian.Uint32(hdr))); err != nil {
					return
				}
				if _, err := c.Write(ans); err != nil {
					return
				}
			}
		}()
	}
}

// startPeerProcess runs this test binary's test named test in a child
// process (env set to 1 tells it to serve), and returns the address the
// child prints after prefix. The child is killed when b ends.
func startPeerProcess(b *testing.B, test, env, prefix string) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^"+test+"$")
	cmd.Env = append(os.Environ(), env+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return a
		}
	}
	b.Fatalf("%s printed no address", test)
	return ""
}
