//go:build !race

// Several nodes in one process start several protoactor remotes, and each
// remote's Start rewrites grpc's global logger while the others' gRPC
// servers read it: a race in the libraries, harmless with one node per
// process (as in production). These tests run without -race (make test runs
// them in a second pass).

package node

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/settee/settee/proto"
)

func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
}

func TestRemoteRequiresClusterSecret(t *testing.T) {
	server := quietSystem()
	t.Cleanup(server.Shutdown)
	r, addr, err := startRemote(server, "127.0.0.1:0", "", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(false) })
	// an actor answering a shard-style request
	if _, err := server.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*pb.GetShardInfo); ok {
			c.Respond(&pb.ShardInfo{Meta: &pb.ShardMeta{UpdateSeq: 42}})
		}
	}), "echo"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		secret string
		ok     bool
	}{
		{"same secret", "s3cret", true},
		{"wrong secret", "guess", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := quietSystem()
			t.Cleanup(client.Shutdown)
			cr, _, err := startRemote(client, "127.0.0.1:0", "", tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cr.Shutdown(false) })
			res, err := client.Root.RequestFuture(actor.NewPID(addr, "echo"), &pb.GetShardInfo{}, 3*time.Second).Result()
			if tc.ok {
				if err != nil || res.(*pb.ShardInfo).Meta.UpdateSeq != 42 {
					t.Fatalf("request over remote: %v %v", res, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("a peer with the wrong secret got an answer: %v", res)
			}
		})
	}
}

// A peer that speaks the transport's gRPC without the cluster token (not
// a settee node with another secret, but any client) is refused on both
// the unary calls and the message stream, before any actor message is
// read.
func TestRemoteRefusesPeersWithoutTheSecret(t *testing.T) {
	server := quietSystem()
	t.Cleanup(server.Shutdown)
	r, addr, err := startRemote(server, "127.0.0.1:0", "", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(false) })
	conn, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := remote.NewRemotingClient(conn)
	tests := []struct {
		name  string
		token string // sent as the header; "" sends none
		ok    bool
	}{
		{"no token", "", false},
		{"the secret itself", "s3cret", false},
		{"another secret's token", clusterToken("guess"), false},
		{"the cluster's token", clusterToken("s3cret"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if tc.token != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, secretHeader, tc.token)
			}
			_, err := client.ListProcesses(ctx, &remote.ListProcessesRequest{})
			if tc.ok {
				// past the token, protoactor's unary calls are refused
				// rather than left to panic the node
				if status.Code(err) != codes.Unimplemented {
					t.Fatalf("unary call with the token: %v, want Unimplemented", err)
				}
				return
			}
			if status.Code(err) != codes.Unauthenticated {
				t.Fatalf("unary call: %v, want Unauthenticated", err)
			}
			stream, err := client.Receive(ctx)
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != codes.Unauthenticated {
				t.Fatalf("message stream: %v, want Unauthenticated", err)
			}
		})
	}
}
