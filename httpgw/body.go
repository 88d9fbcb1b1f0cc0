package httpgw

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"strings"
)

var errNotGzipped = badRequest("Request body is not properly gzipped.")

// gzipped reports whether the request body is gzip-encoded. kivik (and
// any client set up so) compresses every body; CouchDB takes gzip and
// identity, exactly so written, and answers any other encoding 415.
func gzipped(rq *req) (bool, error) {
	switch ce := strings.TrimSpace(rq.r.Header.Get("Content-Encoding")); ce {
	case "", "identity":
		return false, nil
	case "gzip":
		return true, nil
	default:
		return false, newErr(415, "bad_content_type", ce+" is not a supported content encoding.")
	}
}

// bodyReader is the request body as a handler reads it: at most limit
// bytes, of the decompressed body when it is gzipped, so that a small body
// that inflates past the limit (a zip bomb) is a 413 after limit bytes,
// never more memory than a plain body of the limit's size.
func bodyReader(rq *req, limit int64) (io.Reader, error) {
	gz, err := gzipped(rq)
	if err != nil {
		return nil, err
	}
	if rq.r.ContentLength > limit {
		return nil, errTooLarge
	}
	raw := http.MaxBytesReader(rq.w, rq.r.Body, limit)
	if !gz {
		return raw, nil
	}
	zr, err := gzip.NewReader(raw)
	if err != nil {
		return nil, gzipErr(err)
	}
	return &inflated{zr: zr, left: limit}, nil
}

// inflated reads a gzip stream (every member of it, as CouchDB does) and
// fails once more than its limit was inflated.
type inflated struct {
	zr   *gzip.Reader
	left int64
}

func (r *inflated) Read(p []byte) (int, error) {
	if r.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > r.left+1 {
		p = p[:r.left+1]
	}
	n, err := r.zr.Read(p)
	r.left -= int64(n)
	if r.left < 0 {
		return n, errTooLarge
	}
	if err != nil && err != io.EOF {
		err = gzipErr(err)
	}
	return n, err
}

// gzipErr is what a failed read of a gzipped body answers: too large when
// the compressed bytes passed the limit, else not properly gzipped (a bad
// header, a corrupt stream, a checksum that does not match, bytes after
// the last member).
func gzipErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || errors.Is(err, errTooLarge) {
		return errTooLarge
	}
	return errNotGzipped
}
