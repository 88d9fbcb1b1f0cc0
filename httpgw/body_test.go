package httpgw

import (
	"bytes"
	"compress/gzip"
	"errors"
	"net/http/httptest"
	"testing"
)

func gzipOf(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	_, _ = w.Write(b)
	_ = w.Close()
	return out.Bytes()
}

// FuzzGzipBody reads arbitrary bytes as a gzipped body under a limit: the
// answer is the inflated bytes (never more than the limit), 413 or 400
// "not properly gzipped"; never a panic, never another error.
func FuzzGzipBody(f *testing.F) {
	f.Add(gzipOf([]byte(`{"a":1}`)), uint16(64))
	f.Add(gzipOf([]byte(`{"a":1}`)), uint16(3))
	f.Add(append(gzipOf([]byte(`{"a":`)), gzipOf([]byte(`1}`))...), uint16(64))
	f.Add(append(gzipOf([]byte(`{}`)), 'x'), uint16(64))
	f.Add(gzipOf(bytes.Repeat([]byte("0"), 1<<16)), uint16(1000))
	f.Add([]byte("\x1f\x8b\x08\x00garbage"), uint16(64))
	f.Add([]byte{}, uint16(64))
	f.Fuzz(func(t *testing.T, body []byte, limit16 uint16) {
		limit := int64(limit16)
		r := httptest.NewRequest("POST", "/db/_bulk_docs", bytes.NewReader(body))
		r.Header.Set("Content-Encoding", "gzip")
		rq := &req{w: httptest.NewRecorder(), r: r, g: &Gateway{}}
		got, err := readBody(rq, limit)
		switch {
		case err == nil:
			if int64(len(got)) > limit {
				t.Fatalf("inflated %d bytes past the limit %d", len(got), limit)
			}
			// what gzip itself makes of the bytes, when it takes them
			if zr, zerr := gzip.NewReader(bytes.NewReader(body)); zerr == nil {
				var want bytes.Buffer
				if _, rerr := want.ReadFrom(zr); rerr == nil && !bytes.Equal(got, want.Bytes()) {
					t.Fatalf("inflated %q, gzip says %q", got, want.Bytes())
				}
			}
		case errors.Is(err, errTooLarge), errors.Is(err, errNotGzipped):
		default:
			t.Fatalf("error %v", err)
		}
	})
}
