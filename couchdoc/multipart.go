package couchdoc

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"strings"
)

// CouchDB's multipart/related document (PUT /db/doc, GET with
// attachments, open_revs as multipart/mixed) is: a JSON part whose
// _attachments entries say "follows": true, then one part per such entry,
// in the order of the entries:
//
//	--B\r\nContent-Type: application/json\r\n\r\n{json}
//	\r\n--B\r\nContent-Disposition: attachment; filename="a"\r\nContent-Type: t\r\nContent-Length: n\r\n\r\n<bytes>
//	\r\n--B--
//
// An attachment stored gzipped is sent as it is stored, with
// Content-Encoding: gzip in its part and "encoding"/"encoded_length" in its
// stub; "length" is always the identity length.

// Errors of ReadRelated. Each error's text is CouchDB's reason.
var (
	// ErrBadMultipart: the body is not a well-formed multipart document
	// (400 bad_request).
	ErrBadMultipart = errors.New("couchdoc: bad multipart body")
	// ErrNotJSONPart: the first part is not application/json (CouchDB:
	// 415 bad_ctype).
	ErrNotJSONPart = errors.New("couchdoc: first part is not JSON")
	// ErrDocTooLarge: the JSON part is bigger than the limit given.
	ErrDocTooLarge = errors.New("couchdoc: document too large")
)

type mpError struct {
	kind   error
	reason string
}

func (e *mpError) Error() string { return e.reason }
func (e *mpError) Unwrap() error { return e.kind }

func badMultipart(format string, a ...any) error {
	return &mpError{kind: ErrBadMultipart, reason: fmt.Sprintf(format, a...)}
}

// RelatedBoundary reports whether contentType is multipart/related and
// returns its boundary; a multipart/related type without a usable boundary
// is an ErrBadMultipart error. As CouchDB's doc PUT, only a type that
// begins "multipart/related;" (so it has parameters; in lower case) is
// one: a bare "multipart/related" body is read as JSON.
func RelatedBoundary(contentType string) (string, bool, error) {
	if !strings.HasPrefix(strings.TrimSpace(contentType), "multipart/related;") {
		return "", false, nil
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/related" {
		return "", true, badMultipart("Invalid multipart/related Content-Type")
	}
	b := params["boundary"]
	if b == "" || len(b) > 70 {
		return "", true, badMultipart("multipart/related needs a boundary of 1 to 70 characters")
	}
	return b, true, nil
}

// Related is a multipart/related document as read: the JSON part and the
// bodies of the parts after it, in order.
type Related struct {
	JSON  []byte
	Parts [][]byte
}

// ReadRelated reads a whole multipart/related body. The JSON part may be
// at most maxJSON bytes (ErrDocTooLarge). The caller bounds the body as a
// whole (an error of r, such as http.MaxBytesError, is returned wrapped).
// The body must end with its closing delimiter: a truncated body is an
// error, never a shorter document.
func ReadRelated(r io.Reader, boundary string, maxJSON int64) (*Related, error) {
	src := &readErrs{r: r}
	mr := multipart.NewReader(src, boundary)
	p, err := mr.NextRawPart()
	if err != nil {
		return nil, src.wrap(err, "the body has no JSON part")
	}
	ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
	if ct != "application/json" {
		return nil, &mpError{kind: ErrNotJSONPart, reason: "Content-Type must be application/json"}
	}
	js, err := io.ReadAll(io.LimitReader(p, maxJSON+1))
	if err != nil {
		return nil, src.wrap(err, "the JSON part is cut short")
	}
	if int64(len(js)) > maxJSON {
		return nil, &mpError{kind: ErrDocTooLarge, reason: "document too large"}
	}
	out := &Related{JSON: js}
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, src.wrap(err, fmt.Sprintf("attachment part %d is malformed", len(out.Parts)+1))
		}
		var buf bytes.Buffer
		if n, err := strconv.ParseInt(p.Header.Get("Content-Length"), 10, 64); err == nil && n > 0 && n <= 64<<20 {
			buf.Grow(int(n)) // a hint only: the part's own end decides
		}
		if _, err := buf.ReadFrom(p); err != nil {
			return nil, src.wrap(err, fmt.Sprintf("attachment part %d is cut short", len(out.Parts)+1))
		}
		out.Parts = append(out.Parts, buf.Bytes())
	}
}

// readErrs remembers the first error of the body itself (a size limit, a
// broken connection), so that it is told apart from the multipart
// reader's own syntax errors, which are plain strings.
type readErrs struct {
	r   io.Reader
	err error
}

func (e *readErrs) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

func (e *readErrs) wrap(err error, what string) error {
	if e.err != nil {
		return fmt.Errorf("couchdoc: reading multipart body: %w", e.err)
	}
	return badMultipart("%s (%v)", what, err)
}

// NewBoundary returns a random boundary (32 hex digits, like CouchDB's uuids).
func NewBoundary() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// RelatedHead starts a multipart/related document: the delimiter and the
// headers of the JSON part.
func RelatedHead(dst []byte, boundary string) []byte {
	dst = append(dst, "--"...)
	dst = append(dst, boundary...)
	return append(dst, "\r\nContent-Type: application/json\r\n\r\n"...)
}

// AttPartHead is what comes before an attachment's bytes: the delimiter
// that ends the previous part and the attachment part's headers. n is the
// number of bytes sent; encoding is "" or "gzip".
func AttPartHead(dst []byte, boundary, name, contentType, encoding string, n int) []byte {
	dst = append(dst, "\r\n--"...)
	dst = append(dst, boundary...)
	dst = append(dst, "\r\nContent-Disposition: "...)
	if plainName(name) {
		dst = append(dst, `attachment; filename="`...)
		dst = append(dst, name...)
		dst = append(dst, '"')
	} else if cd := mime.FormatMediaType("attachment", map[string]string{"filename": name}); cd != "" {
		dst = append(dst, cd...) // escaped, or RFC 2231 for non-ASCII
	} else {
		dst = append(dst, "attachment"...)
	}
	dst = append(dst, "\r\nContent-Type: "...)
	dst = append(dst, headerSafe(contentType)...)
	dst = append(dst, "\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	if encoding != "" {
		dst = append(dst, "\r\nContent-Encoding: "...)
		dst = append(dst, headerSafe(encoding)...)
	}
	return append(dst, "\r\n\r\n"...)
}

// RelatedTail ends a multipart/related document.
func RelatedTail(dst []byte, boundary string) []byte {
	dst = append(dst, "\r\n--"...)
	dst = append(dst, boundary...)
	return append(dst, "--"...)
}

// plainName: a name CouchDB's quoted filename form carries as it is.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// headerSafe keeps a stored value from breaking a part's header block.
func headerSafe(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}
