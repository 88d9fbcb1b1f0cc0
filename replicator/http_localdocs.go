package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/settee/settee/internal/couchpath"
)

func (e *HTTPEndpoint) GetLocal(ctx context.Context, id string) ([]byte, error) {
	b, err := e.do(ctx, http.MethodGet, "/_local/"+couchpath.Escape(id), nil, nil)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v struct {
		Rev string `json:"_rev"`
	}
	_ = json.Unmarshal(b, &v)
	e.mu.Lock()
	e.localRevs[id] = v.Rev
	e.mu.Unlock()
	return b, nil
}

func (e *HTTPEndpoint) PutLocal(ctx context.Context, id string, body []byte) error {
	e.mu.Lock()
	rev := e.localRevs[id]
	e.mu.Unlock()
	if rev != "" && len(body) > 1 {
		// CouchDB checks _local revs
		withRev := append([]byte(`{"_rev":`), strconv.Quote(rev)...)
		if len(body) > 2 {
			withRev = append(withRev, ',')
		}
		body = append(withRev, body[1:]...)
	}
	b, err := e.do(ctx, http.MethodPut, "/_local/"+couchpath.Escape(id), nil, body)
	if err != nil {
		return err
	}
	var v struct {
		Rev string `json:"rev"`
	}
	if json.Unmarshal(b, &v) == nil && v.Rev != "" {
		e.mu.Lock()
		e.localRevs[id] = v.Rev
		e.mu.Unlock()
	}
	return nil
}
