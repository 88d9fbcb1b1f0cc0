package actors

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Answer is one reply collected by a Gather: Tag says which request it
// answers; Err is ErrUnreachable when the target did not exist.
type Answer struct {
	Tag int
	Msg any
	Err error
}

// Gather collects the replies of several requests on one channel. Each
// request's sender is a small process that hands its reply straight to
// the channel: unlike a Future per request (a timer, a condition variable
// and a goroutine to wait on each one), a reply wakes only the goroutine
// that reads the channel. That is one wake-up less per copy a read asks,
// on the path every quorum read takes. The caller bounds the wait (its own
// timer or ctx) and must Close the Gather when done.
type Gather struct {
	root *actor.RootContext
	sys  *actor.ActorSystem
	ch   chan Answer
	pids []*actor.PID
}

// NewGather makes a Gather for at most max requests sent from root.
func NewGather(root *actor.RootContext, max int) *Gather {
	return &Gather{root: root, sys: root.ActorSystem(), ch: make(chan Answer, max), pids: make([]*actor.PID, 0, max)}
}

// Request sends msg to pid; its reply arrives on C with tag. No more than
// the Gather's max requests may be made.
func (g *Gather) Request(tag int, pid *actor.PID, msg any) {
	p := &replyProcess{g: g, tag: tag}
	sender, _ := g.sys.ProcessRegistry.Add(p, "gather"+g.sys.ProcessRegistry.NextId())
	p.pid = sender
	g.pids = append(g.pids, sender)
	g.root.RequestWithCustomSender(pid, msg, sender)
}

// Put delivers an answer made without a request (a copy read on the
// caller's goroutine); it takes one of the Gather's max requests.
func (g *Gather) Put(tag int, msg any) { g.ch <- Answer{Tag: tag, Msg: msg} }

// C delivers the replies, one per request that was answered.
func (g *Gather) C() <-chan Answer { return g.ch }

// Close forgets the requests not yet answered: a late reply goes nowhere.
func (g *Gather) Close() {
	for _, pid := range g.pids {
		g.sys.ProcessRegistry.Remove(pid)
	}
}

type replyProcess struct {
	g    *Gather
	tag  int
	pid  *actor.PID
	done atomic.Bool
}

func (p *replyProcess) SendUserMessage(_ *actor.PID, message any) {
	if !p.done.CompareAndSwap(false, true) {
		return
	}
	_, msg, _ := actor.UnwrapEnvelope(message)
	a := Answer{Tag: p.tag, Msg: msg}
	if _, ok := msg.(*actor.DeadLetterResponse); ok {
		a = Answer{Tag: p.tag, Err: ErrUnreachable}
	}
	p.g.sys.ProcessRegistry.Remove(p.pid)
	// the channel has room for every request's one answer
	p.g.ch <- a
}

// SendSystemMessage: a request's answer is a user message; system
// messages (a watch, a stop) carry none.
func (p *replyProcess) SendSystemMessage(*actor.PID, any) {}

func (p *replyProcess) Stop(pid *actor.PID) { p.g.sys.ProcessRegistry.Remove(pid) }
