package replicator

import (
	"context"
	"encoding/json"
	"errors"

	pb "github.com/settee/settee/proto"
)

// ErrNotFound is returned by an endpoint for a missing database or doc.
var ErrNotFound = errors.New("replicator: not found")

// DBInfo is what the replicator needs of GET /db.
type DBInfo struct {
	UpdateSeq         string // raw JSON
	InstanceStartTime string
}

// ChangesQuery asks an endpoint for one page of _changes, style=all_docs.
type ChangesQuery struct {
	Since string // raw JSON seq ("" or "0": from the start)
	Limit int
	// DocIDs filters by doc id (filter=_doc_ids).
	DocIDs []string
	// Selector (a JSON object) filters by a Mango selector
	// (filter=_selector): the source sends only the changes whose doc
	// matches. A source that refuses the filter sends them all, and the
	// worker's check of the fetched revs filters alone.
	Selector json.RawMessage
	// Filter is a design doc's filter function, "ddoc/name", with the
	// replication's query_params as the req.query it sees (CouchDB's
	// filter and query_params).
	Filter      string
	QueryParams map[string]string
	// Wait: when there is nothing after Since, wait up to Timeout for a
	// change (longpoll) before answering an empty page.
	Wait    bool
	Timeout int // milliseconds
	// SeqInterval (Feed): the source may give only every SeqInterval-th
	// row a seq (seq_interval), sparing it the encoding of the others.
	SeqInterval int
}

// ChangesPage is one page of changes.
type ChangesPage struct {
	Rows    []*pb.RepChange
	LastSeq string // raw JSON
	Pending uint64
	// End marks a feed's last page.
	End bool
}

// RevDiff is one doc's answer in _revs_diff.
type RevDiff struct {
	Missing   []string `json:"missing"`
	Ancestors []string `json:"possible_ancestors,omitempty"`
}

// FetchStats counts a Fetch's use of _bulk_get as CouchDB's replicator
// reports it: Attempts, the revs asked of _bulk_get; Docs, the docs it
// answered (a source without _bulk_get, or settee's local one, has none).
type FetchStats struct{ BulkGetAttempts, BulkGetDocs uint64 }

// FetchItem names a rev to fetch (bulk_get item); AttsSince are revs the
// target already has, whose attachments need not be sent.
type FetchItem struct {
	ID        string
	Rev       string
	AttsSince []string
}

// Endpoint is one side of a replication: another server over HTTP, or a
// database of this node reached through the coordinator.
type Endpoint interface {
	// Name is the endpoint as shown to users (no credentials).
	Name() string
	Info(ctx context.Context) (*DBInfo, error)
	Create(ctx context.Context) error
	// Changes reads one page of changes (q.Limit rows at most), or waits
	// for one when q.Wait.
	Changes(ctx context.Context, q ChangesQuery) (*ChangesPage, error)
	// Feed reads every change after q.Since up to the source's end as it
	// is now, as one stream, and calls page with pages of at most size rows
	// (more only when rows carry no seq), in order, while it reads; page
	// blocks for backpressure. The last page carries the feed's last seq.
	Feed(ctx context.Context, q ChangesQuery, size int, page func(*ChangesPage) error) error
	RevsDiff(ctx context.Context, revs map[string][]string) (map[string]RevDiff, error)
	// Fetch reads revisions with their _revisions (latest=true) and calls
	// emit for each one found, as JSON ready for _bulk_docs
	// new_edits=false. A rev the source no longer has is skipped. The
	// stats say how much went through _bulk_get.
	Fetch(ctx context.Context, items []FetchItem, emit func(id string, doc []byte)) (FetchStats, error)
	// BulkDocs writes docs with new_edits=false and returns how many the
	// target refused.
	BulkDocs(ctx context.Context, docs [][]byte) (failures int, err error)
	// GetLocal reads a _local doc's JSON (nil, nil when missing).
	GetLocal(ctx context.Context, id string) ([]byte, error)
	PutLocal(ctx context.Context, id string, body []byte) error
	Close()
}
