package node

import (
	"context"
	"io"
	"log/slog"
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
	body := []byte(`{"data":"` + strings.Repeat("x", 14500) + `"}`)
	if _, err := sysB.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *pb.Ping:
			c.Respond(&pb.Pong{From: m.From})
		case *pb.GetDoc:
			c.Respond(&pb.DocReply{Bodies: []*pb.RevBody{{Rev: "1-abc", Json: body}}})
		}
	}), "echo"); err != nil {
		b.Fatal(err)
	}
	pid := actor.NewPID(addrB, "echo")
	ctx := context.Background()
	b.Run("small", func(b *testing.B) {
		for b.Loop() {
			if _, err := actors.Ask[*pb.Pong](ctx, sysA.Root, pid, &pb.Ping{From: "a"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("doc-14.5KB", func(b *testing.B) {
		for b.Loop() {
			if _, err := actors.Ask[*pb.DocReply](ctx, sysA.Root, pid, &pb.GetDoc{Id: "x"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
