package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/settee/settee/internal/couchpath"
	pb "github.com/settee/settee/proto"
)

// A replication with a design doc's filter ("filter": "ddoc/name") has an
// id that hashes the filter function's source as the source database has
// it, read when the id is computed (CouchDB's couch_replicator_ids with
// couch_replicator_filters:fetch): an edited filter function is another
// replication, with checkpoints of its own, so it starts from the
// beginning. When the source, its design doc or the filter cannot be
// read, the replication gets no id: POST /_replicate answers 404
// not_found, and a _replicator doc is in state "error" with CouchDB's
// reason, tried again with the crash backoff. A _replicator doc's filter
// is read again every filterRecheck while its job runs (CouchDB's
// filter_backoff, about a minute): when the function changed, the old job
// stops and the new id's starts.

// FilterFetchError is CouchDB's filter_fetch_error: the source, the
// design doc or its filter could not be read; Reason is CouchDB's text.
type FilterFetchError struct{ Reason string }

func (e *FilterFetchError) Error() string { return e.Reason }

// designReader is an endpoint that reads a design doc (its JSON; an error
// wrapping ErrNotFound when it is missing or deleted).
type designReader interface {
	designDoc(ctx context.Context, id string) ([]byte, error)
}

// filterFetchTimeout bounds the reading of a _replicator doc's filter
// (the watcher waits for it).
const filterFetchTimeout = 30 * time.Second

// filterRecheckDefault is how often a running _replicator doc's filter is
// read again when Config.FilterRecheck is 0.
var filterRecheckDefault atomic.Int64

func init() { filterRecheckDefault.Store(int64(time.Minute)) }

// endpointURI names a source in a fetch error as CouchDB's db_uri: the
// URL without credentials, with its trailing slash; a local database by
// its name.
func endpointURI(s *Spec) string {
	if s.Local {
		return s.URL
	}
	return strings.TrimSuffix(s.URL, "/") + "/"
}

// FetchFilterCode reads filter ("ddoc/name") of the source database src
// (uri names it in errors): the function's source, with a one-line
// source's leading and trailing spaces dropped, as CouchDB reads it.
func FetchFilterCode(ctx context.Context, src Endpoint, uri, filter string) (string, error) {
	ddoc, name, _ := strings.Cut(filter, "/")
	if _, err := src.Info(ctx); err != nil {
		what := err.Error()
		if errors.Is(err, ErrNotFound) {
			what = `{db_not_found,<<"` + uri + `">>}`
		}
		return "", &FilterFetchError{fmt.Sprintf("Could not open source database `%s`: %s", uri, what)}
	}
	dr, ok := src.(designReader)
	if !ok {
		return "", &FilterFetchError{fmt.Sprintf("Couldn't open document `_design/%s` from source database `%s`: this endpoint reads no design docs", ddoc, uri)}
	}
	body, err := dr.designDoc(ctx, "_design/"+ddoc)
	if err != nil {
		what := err.Error()
		if errors.Is(err, ErrNotFound) {
			what = `{error,<<"not_found">>}`
		}
		return "", &FilterFetchError{fmt.Sprintf("Couldn't open document `_design/%s` from source database `%s`: %s", ddoc, uri, what)}
	}
	parseErr := func(what string) error {
		return &FilterFetchError{fmt.Sprintf("Couldn't parse filter code from document %s on `%s`  Error: %s", ddoc, uri, what)}
	}
	// couch_util:get_nested_json_value(Body, [filters, Name])
	var code string
	cur := json.RawMessage(body)
	for _, key := range []string{"filters", name} {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil || obj == nil {
			return "", parseErr("{not_found,json_mismatch}")
		}
		v, ok := obj[key]
		if !ok {
			return "", parseErr(`{not_found,<<"missing json key: ` + key + `">>}`)
		}
		cur = v
	}
	if json.Unmarshal(cur, &code) != nil {
		return "", parseErr("badarg")
	}
	return trimFilterCode(code), nil
}

// trimFilterCode is CouchDB's re:replace(Code, "^ *(.*?) *$", "\\1"): the
// pattern's "." stops at a newline, so only a source of one line (a final
// newline aside) loses its spaces at both ends.
func trimFilterCode(code string) string {
	line, nl := strings.CutSuffix(code, "\n")
	if strings.Contains(line, "\n") {
		return code
	}
	line = strings.Trim(line, " ")
	if nl {
		line += "\n"
	}
	return line
}

// fetchFilter reads rep's filter source into rep.FilterCode (nothing
// without a design doc filter).
func (s *Scheduler) fetchFilter(ctx context.Context, rep *Rep) error {
	if rep.Filter == "" || rep.Source == nil {
		return nil
	}
	src := s.endpoint(rep.Source, rep, nil, s.connTimeout(rep))
	defer src.Close()
	code, err := FetchFilterCode(ctx, src, endpointURI(rep.Source), rep.Filter)
	if err != nil {
		return err
	}
	rep.FilterCode = code
	return nil
}

// filterRecheck is how often a running _replicator doc's filter is read
// again.
func (s *Scheduler) filterRecheck() time.Duration {
	if s.cfg.FilterRecheck > 0 {
		return s.cfg.FilterRecheck
	}
	return time.Duration(filterRecheckDefault.Load())
}

// docFilterCode reads the filter source of a _replicator doc's
// replication before docChanged takes the scheduler's lock ("" and no
// error when it has no design doc filter). A completed doc keeps the
// source its job ran with.
func (s *Scheduler) docFilterCode(id string, deleted bool, body []byte) (string, error) {
	if deleted {
		return "", nil
	}
	rep, err := ParseRep(body)
	if err != nil || rep.Cancel || rep.Filter == "" {
		return "", nil
	}
	var st struct {
		State string `json:"_replication_state"`
	}
	_ = json.Unmarshal(body, &st)
	if st.State == "completed" {
		s.mu.Lock()
		old := s.byDoc[id]
		s.mu.Unlock()
		if old != nil && old.rep != nil && old.rep.Filter == rep.Filter {
			return old.rep.FilterCode, nil
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, filterFetchTimeout)
	defer cancel()
	if err := s.fetchFilter(ctx, rep); err != nil {
		if st.State == "completed" {
			return "", nil // nothing runs it; the id is not used
		}
		return "", err
	}
	return rep.FilterCode, nil
}

// filterFailed records a _replicator doc whose filter could not be read
// (under s.mu): state "error" with CouchDB's reason, tried again after
// the crash backoff. A job already running for the same revision of the
// doc (a periodic check that failed) runs on.
func (s *Scheduler) filterFailed(old *entry, id, rev string, body []byte, rep *Rep, err error) {
	if old != nil && old.docRev == rev && old.repID != "" {
		old.filterChecked = time.Now()
		return
	}
	n := 1
	if old != nil {
		if old.state == "error" {
			n = old.errCount + 1
		}
		s.remove(old)
	}
	e := &entry{docID: id, docRev: rev, docBody: body, rep: rep, state: "error", errMsg: err.Error(),
		errCount: n, startTime: time.Now(), stats: &pb.RepStats{}}
	d := s.cfg.RetryBase << min(n-1, 20)
	e.nextStart = time.Now().Add(min(d, s.cfg.RetryMax))
	e.event("crashed", e.errMsg)
	s.byDoc[id] = e
}

// refreshFilters reads again the filters of _replicator docs in state
// "error" whose backoff is over and of running ones not checked for
// filterRecheck, and handles each doc as if it had changed: a filter that
// changed gives a new replication id, whose job replaces the old one.
func (s *Scheduler) refreshFilters() {
	type due struct {
		id, rev string
		body    []byte
	}
	var todo []due
	now := time.Now()
	every := s.filterRecheck()
	s.mu.Lock()
	for id, e := range s.byDoc {
		// every node keeps every doc's id current (not only its own):
		// a node that takes a doc over resumes from its checkpoint
		if e.rep == nil || e.rep.Filter == "" {
			continue
		}
		switch {
		case e.state == "error" && !now.Before(e.nextStart):
		case e.repID != "" && e.state != "completed" && e.state != "failed" && now.Sub(e.filterChecked) >= every:
		default:
			continue
		}
		todo = append(todo, due{id, e.docRev, e.docBody})
	}
	s.mu.Unlock()
	for _, d := range todo {
		if s.ctx.Err() != nil {
			return
		}
		s.docChanged(d.id, d.rev, false, d.body)
	}
}

// designDoc reads a design doc over HTTP.
func (e *HTTPEndpoint) designDoc(ctx context.Context, id string) ([]byte, error) {
	name := strings.TrimPrefix(id, "_design/")
	return e.do(ctx, http.MethodGet, "/_design/"+couchpath.Escape(name), nil, nil)
}

// designDoc reads a design doc of this node's database.
func (e *LocalEndpoint) designDoc(ctx context.Context, id string) ([]byte, error) {
	r, err := e.c.GetDocR(ctx, e.db, &pb.GetDoc{Id: id}, 1)
	if err != nil {
		return nil, e.wrap(err)
	}
	if r.Info == nil || len(r.Bodies) == 0 || r.Bodies[0].Missing || r.Bodies[0].Deleted {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return r.Bodies[0].Json, nil
}
