package httpgw

import (
	"net/http"
	"strconv"

	"github.com/settee/settee/metrics"
)

// historian is what a Metrics offers when it keeps the node's recent
// history (package metrics' does).
type historian interface {
	History() *metrics.History
}

// historyAnswer is GET /_node/_local/_history: the node's samples of its
// own metrics over the last window, oldest first (a settee extension; the
// console's live graphs poll it).
type historyAnswer struct {
	Node            string           `json:"node"`
	IntervalSeconds float64          `json:"interval_seconds"`
	WindowSeconds   float64          `json:"window_seconds"`
	Samples         []metrics.Sample `json:"samples"`
}

// handleHistory answers /_node/_local/_history[?since=<unix ms>]: only
// the samples taken after since, so a page polls for what is new.
func (g *Gateway) handleHistory(rq *req) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		return methodNotAllowed("GET,HEAD")
	}
	h, ok := g.cfg.Metrics.(historian)
	if !ok || h.History() == nil {
		return errMissing
	}
	var since int64
	if rq.q.Has("since") {
		v := rq.q.Get("since")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return badRequest("since must be a time in unix milliseconds, got " + strconv.Quote(v))
		}
		since = n
	}
	hist := h.History()
	return g.writeJSON(rq, 200, historyAnswer{
		Node:            g.cfg.NodeName,
		IntervalSeconds: hist.Interval().Seconds(),
		WindowSeconds:   hist.Window().Seconds(),
		Samples:         hist.Samples(since),
	})
}
