package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/settee/settee/couchdoc"
)

type bulkGetJSON struct {
	Results []struct {
		ID   string      `json:"id"`
		Docs []revResult `json:"docs"`
	} `json:"results"`
}

// revResult is one rev of a _bulk_get result or of an open_revs answer.
type revResult struct {
	OK      json.RawMessage `json:"ok"`
	Missing string          `json:"missing"` // open_revs
	Error   *struct {
		Rev    string `json:"rev"`
		Error  string `json:"error"`
		Reason string `json:"reason"`
	} `json:"error"` // _bulk_get
}

// emitRev passes a found rev on. A rev the source no longer has is
// skipped (CouchDB's replicator skips it too: it was stemmed or purged
// since _changes listed it); any other answer fails the fetch rather than
// let the checkpoint pass a rev that was never written.
func (e *HTTPEndpoint) emitRev(what, id string, r *revResult, emit func(string, []byte)) error {
	switch {
	case len(r.OK) > 0 && r.OK[0] == '{':
		emit(id, r.OK)
		return nil
	case r.Missing != "":
		return nil
	case r.Error != nil && r.Error.Error == "not_found":
		return nil
	case r.Error != nil:
		return fmt.Errorf("%s: %s of %s rev %s: %s: %s", e.name, what, id, r.Error.Rev, r.Error.Error, r.Error.Reason)
	}
	return fmt.Errorf("%s: bad %s answer: a result for %s that is neither a doc nor an error", e.name, what, id)
}

func (e *HTTPEndpoint) Fetch(ctx context.Context, items []FetchItem, emit0 func(string, []byte)) (FetchStats, error) {
	emit := func(id string, doc []byte) { emit0(id, e.encodeAtts(ctx, id, doc)) }
	var st FetchStats
	if !e.noBulkGet.Load() {
		st.BulkGetAttempts = uint64(len(items))
		err := e.bulkGet(ctx, items, func(id string, doc []byte) {
			st.BulkGetDocs++
			emit(id, doc)
		})
		if err == nil || !bulkGetUnsupported(err) {
			return st, err
		}
		// an old peer without _bulk_get (CouchDB < 2.3): open_revs per doc
		e.noBulkGet.Store(true)
	}
	for _, it := range items {
		if err := e.openRevs(ctx, it, emit); err != nil {
			return st, err
		}
	}
	return st, nil
}

func (e *HTTPEndpoint) bulkGet(ctx context.Context, items []FetchItem, emit func(string, []byte)) error {
	type item struct {
		ID        string   `json:"id"`
		Rev       string   `json:"rev"`
		AttsSince []string `json:"atts_since,omitempty"`
	}
	req := struct {
		Docs []item `json:"docs"`
	}{Docs: make([]item, len(items))}
	for i, it := range items {
		req.Docs[i] = item(it)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	// att_encoding_info: which inline data the source stores encoded
	// (encodeAtts)
	v := url.Values{"revs": {"true"}, "latest": {"true"}, "attachments": {"true"}, "att_encoding_info": {"true"}}
	b, err := e.do(ctx, http.MethodPost, "/_bulk_get", v, body)
	if err != nil {
		return err
	}
	return e.splitBulkGet(b, items, emit)
}

// splitBulkGet passes on the docs of a _bulk_get answer as slices of it
// (no copy). It reads the answer with couchdoc's walker in one pass, each
// doc scanned once to find its end: encoding/json scanned megabytes of
// base64 a byte at a time and was most of the fetch's cost
// (replicator/DESIGN.md, measurements).
func (e *HTTPEndpoint) splitBulkGet(b []byte, items []FetchItem, emit func(string, []byte)) error {
	type result struct {
		id   string
		docs []revResult
		bad  bool // a doc that is neither a doc nor an error
	}
	var results []result
	sawResults := false
	end := couchdoc.ObjectAt(b, 0, func(key []byte, vs int) int {
		if string(key) != `"results"` {
			return couchdoc.SkipValue(b, vs)
		}
		sawResults = true
		return couchdoc.ArrayAt(b, vs, func(rs int) int {
			var r result
			re := couchdoc.ObjectAt(b, rs, func(k []byte, vs int) int {
				if string(k) != `"docs"` {
					ve := couchdoc.SkipValue(b, vs)
					if string(k) == `"id"` && (ve < 0 || json.Unmarshal(b[vs:ve], &r.id) != nil) {
						return -1
					}
					return ve
				}
				return couchdoc.ArrayAt(b, vs, func(ds int) int {
					var rr revResult
					de := couchdoc.ObjectAt(b, ds, func(k []byte, vs int) int {
						ve := couchdoc.SkipValue(b, vs)
						switch {
						case ve < 0:
						case string(k) == `"ok"`:
							rr.OK = b[vs:ve:ve]
						case string(k) == `"error"`:
							if json.Unmarshal(b[vs:ve], &rr.Error) != nil {
								return -1
							}
						}
						return ve
					})
					if de < 0 {
						// not an object: the result is wrong, not the answer
						de = couchdoc.SkipValue(b, ds)
						r.bad = true
					}
					r.docs = append(r.docs, rr)
					return de
				})
			})
			results = append(results, r)
			return re
		})
	})
	if end < 0 {
		// the slow parser says what is wrong
		var v bulkGetJSON
		if err := json.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("%s: bad _bulk_get answer: %w", e.name, jsonProblem(err))
		}
		return fmt.Errorf("%s: bad _bulk_get answer: not the shape of one", e.name)
	}
	if !sawResults {
		return fmt.Errorf("%s: bad _bulk_get answer: no results", e.name)
	}
	answered := make(map[string]bool, len(results))
	for _, r := range results {
		answered[r.id] = true
	}
	for _, it := range items {
		if !answered[it.ID] {
			return fmt.Errorf("%s: bad _bulk_get answer: no result for %s", e.name, it.ID)
		}
	}
	for _, r := range results {
		if r.bad {
			return fmt.Errorf("%s: bad _bulk_get answer: a result for %s that is neither a doc nor an error", e.name, r.id)
		}
		for i := range r.docs {
			if err := e.emitRev("_bulk_get", r.id, &r.docs[i], emit); err != nil {
				return err
			}
		}
	}
	return nil
}

// bulkGetUnsupported recognises a peer without _bulk_get: 405, 400, or a
// 404 that is not about the database.
func bulkGetUnsupported(err error) bool {
	var he *HTTPError
	if !errors.As(err, &he) {
		return false
	}
	switch he.Status {
	case 400, 405:
		return true
	case 404:
		return !dbMissing(err)
	}
	return false
}

func (e *HTTPEndpoint) openRevs(ctx context.Context, it FetchItem, emit func(string, []byte)) error {
	revs, _ := json.Marshal([]string{it.Rev})
	v := url.Values{"revs": {"true"}, "latest": {"true"}, "attachments": {"true"}, "att_encoding_info": {"true"}, "open_revs": {string(revs)}}
	if len(it.AttsSince) > 0 {
		s, _ := json.Marshal(it.AttsSince)
		v.Set("atts_since", string(s))
	}
	b, err := e.do(ctx, http.MethodGet, docPath(it.ID), v, nil)
	if errors.Is(err, ErrNotFound) && !dbMissing(err) {
		// a peer that answers a missing doc 404 rather than 200 with
		// "missing" entries (CouchDB's way): the rev is gone, skipped
		return nil
	}
	if err != nil {
		// a missing database is not a missing rev: skipping every doc
		// would let the checkpoint pass changes never written
		return err
	}
	var res []revResult
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: bad open_revs answer: %w", e.name, jsonProblem(err))
	}
	for i := range res {
		if err := e.emitRev("open_revs", it.ID, &res[i], emit); err != nil {
			return err
		}
	}
	return nil
}
