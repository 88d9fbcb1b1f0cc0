package node

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Node-to-node traffic is protoactor remote (gRPC). Every stream and call
// carries a token derived from the cluster secret; a peer without it is
// refused before any actor message is read.
const secretHeader = "x-settee-cluster"

// maxNodeMessage bounds one gRPC message between nodes (a batch of
// protoactor messages): above the largest request settee accepts in one
// piece for a shard, below protobuf's 2 GB limit.
const maxNodeMessage = 1 << 30

// nodeWindow is the HTTP/2 flow-control window of node-to-node streams
// and connections. Setting it turns off gRPC's bandwidth estimator, which
// answered each burst of data with a PING (and the peer with its ack):
// on a read that is one small request and one reply, that doubled the
// writes and reads each node made, and on this machine a loopback write
// and the wake-up it causes cost ~20 us of CPU. A large window also means
// few WINDOW_UPDATE frames (one per quarter window received).
const nodeWindow = 16 << 20

// clusterToken is what travels instead of the secret itself.
func clusterToken(secret string) string {
	sum := sha256.Sum256([]byte("settee-cluster-v1:" + secret))
	return hex.EncodeToString(sum[:])
}

type tokenCreds struct{ token string }

func (c tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{secretHeader: c.token}, nil
}

// RequireTransportSecurity is false: the cluster network is trusted for
// confidentiality today; the token only authenticates peers.
func (c tokenCreds) RequireTransportSecurity() bool { return false }

func checkToken(ctx context.Context, want string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	got := md.Get(secretHeader)
	if len(got) != 1 || subtle.ConstantTimeCompare([]byte(got[0]), []byte(want)) != 1 {
		return status.Error(codes.Unauthenticated, "settee: wrong or missing cluster secret")
	}
	return nil
}

// startRemote makes sys reachable from other nodes on addr (host:port,
// port 0 picks one), advertising advertise when set. It returns the address
// other nodes use.
func startRemote(sys *actor.ActorSystem, addr, advertise, secret string) (r *remote.Remote, address string, err error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, "", fmt.Errorf("node: node address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, "", fmt.Errorf("node: node address %q: %w", addr, err)
	}
	if port == 0 {
		// protoactor advertises the listen address as configured: find a
		// free port first so the advertised one is real
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, "", fmt.Errorf("node: node address %q: %w", addr, err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	token := clusterToken(secret)
	opts := []remote.ConfigOption{
		// a shard's part of a _bulk_docs batch travels as one message:
		// gRPC's 4 MB default cut the connection on medium docs
		remote.WithEndpointWriterBatchSize(64),
		remote.WithCallOptions(grpc.MaxCallRecvMsgSize(maxNodeMessage), grpc.MaxCallSendMsgSize(maxNodeMessage)),
		remote.WithServerOptions(
			grpc.InitialWindowSize(nodeWindow),
			grpc.InitialConnWindowSize(nodeWindow),
			grpc.MaxRecvMsgSize(maxNodeMessage),
			grpc.MaxSendMsgSize(maxNodeMessage),
			grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
				if err := checkToken(ss.Context(), token); err != nil {
					return err
				}
				return h(srv, ss)
			}),
			grpc.UnaryInterceptor(func(ctx context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
				if err := checkToken(ctx, token); err != nil {
					return nil, err
				}
				// nodes talk over the message stream only; protoactor's
				// unary calls (ListProcesses, GetProcessDiagnostics)
				// panic "implement me", which would end the process
				return nil, status.Errorf(codes.Unimplemented, "settee: %s is not served", info.FullMethod)
			}),
		),
		// replacing protoactor's dial options drops its default insecure
		// transport: say it again
		remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(nodeWindow), grpc.WithInitialConnWindowSize(nodeWindow),
			grpc.WithPerRPCCredentials(tokenCreds{token: token})),
	}
	if advertise != "" {
		opts = append(opts, remote.WithAdvertisedHost(advertise))
	}
	rc := remote.Configure(host, port, opts...)
	// protoactor retries a failed connection 5 times with 2 s sleeps while
	// messages to that node pile up; a node that is down is already
	// handled by liveness, and the next message dials afresh
	rc.MaxRetryCount = 1
	r = remote.NewRemote(sys, rc)
	defer func() {
		// remote.Start panics when it cannot listen
		if p := recover(); p != nil {
			r, address, err = nil, "", fmt.Errorf("node: start remote on %s: %v", addr, p)
		}
	}()
	r.Start()
	return r, sys.Address(), nil
}

// nodeKey is the HMAC key of requests one member's HTTP API forwards to
// another's as its authenticated user; nil without a cluster secret. It
// is not the secret itself, nor the transport's token.
func nodeKey(secret string) []byte {
	if secret == "" {
		return nil
	}
	sum := sha256.Sum256([]byte("settee-node-proxy-v1:" + secret))
	return sum[:]
}
