package testserver

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// NewRequest builds a request to path with no credentials; JSON content
// type is set when there is a body.
func (s *Server) NewRequest(t testing.TB, method, path string, body any) *http.Request {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = bytes.NewBufferString(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		t.Fatalf("testserver: body of type %T", body)
	}
	req, err := http.NewRequest(method, s.URL+path, r)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	return req
}
