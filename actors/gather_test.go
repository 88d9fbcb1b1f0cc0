package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Replies come back tagged with their request, a request to an actor that
// does not exist comes back as ErrUnreachable, and a reply after Close
// goes nowhere.
func TestGather(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	echo := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if s, ok := c.Message().(string); ok {
			c.Respond(s + "!")
		}
	}))
	g := NewGather(sys.Root, 3)
	g.Request(0, echo, "a")
	g.Request(1, echo, "b")
	g.Request(2, actor.NewPID(sys.Address(), "nobody"), "c")
	got := map[int]Answer{}
	for len(got) < 3 {
		select {
		case a := <-g.C():
			got[a.Tag] = a
		case <-time.After(10 * time.Second):
			t.Fatalf("answers so far: %v", got)
		}
	}
	if got[0].Msg != "a!" || got[1].Msg != "b!" || got[0].Err != nil {
		t.Fatalf("answers %v", got)
	}
	if got[2].Err != ErrUnreachable {
		t.Fatalf("dead letter answered %v", got[2])
	}
	g.Close()
	for _, pid := range g.pids {
		if _, ok := sys.ProcessRegistry.GetLocal(pid.Id); ok {
			t.Fatalf("sender %s outlived Close", pid.Id)
		}
	}
}
