package replicator

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	pb "github.com/settee/settee/proto"
)

// seqParam turns a raw JSON seq into a query parameter value.
func seqParam(raw string) string {
	if strings.HasPrefix(raw, `"`) {
		var s string
		if json.Unmarshal([]byte(raw), &s) == nil {
			return s
		}
	}
	return raw
}

type changesJSON struct {
	Results []changeRow     `json:"results"`
	LastSeq json.RawMessage `json:"last_seq"`
	Pending uint64          `json:"pending"`
}

// Changes reads one page of changes (a longpoll when q.Wait).
func (e *HTTPEndpoint) Changes(ctx context.Context, q ChangesQuery) (*ChangesPage, error) {
	b, err := e.askChanges(ctx, q, false)
	if err != nil {
		return nil, err
	}
	var c changesJSON
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: bad _changes answer: %w", e.name, jsonProblem(err))
	}
	// an answer without results would read as "nothing changed": the
	// job would finish, or checkpoint, past changes it never saw
	if c.Results == nil {
		return nil, fmt.Errorf("%s: bad _changes answer: no results", e.name)
	}
	p := &ChangesPage{LastSeq: string(c.LastSeq), Pending: c.Pending, Rows: make([]*pb.RepChange, 0, len(c.Results))}
	for i := range c.Results {
		ch, ok := c.Results[i].repChange()
		if !ok {
			return nil, fmt.Errorf("%s: bad _changes answer: a row without an id or revs", e.name)
		}
		p.Rows = append(p.Rows, ch)
	}
	return p, nil
}

// askChanges sends the _changes request for q (count: limit=0, only the
// pending count) and returns the answer. A source that refuses
// filter=_selector is asked once more, unfiltered (refusesSelector says
// so only the first time).
func (e *HTTPEndpoint) askChanges(ctx context.Context, q ChangesQuery, count bool) ([]byte, error) {
	for {
		method, v, body := e.changesRequest(q)
		if count {
			v.Set("limit", "0")
		}
		b, err := e.do(ctx, method, "/_changes", v, body)
		if err == nil || !e.refusesSelector(q, err) {
			return b, err
		}
	}
}
