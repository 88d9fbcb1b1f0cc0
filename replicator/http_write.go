package replicator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/settee/settee/couchdoc"
)

// BulkDocs writes docs with new_edits=false: a doc carrying at least
// MultipartMin bytes of attachment data goes as its own multipart/related
// PUT (no base64 on the wire or in the target's parser, as CouchDB's
// replicator writes docs with attachments), the others in one _bulk_docs.
func (e *HTTPEndpoint) BulkDocs(ctx context.Context, docs [][]byte) (int, error) {
	failures := 0
	rest := docs[:0:0]
	for _, d := range docs {
		fd := e.multipartDoc(d)
		if fd == nil {
			rest = append(rest, d)
			continue
		}
		failed, err := e.putMultipart(ctx, fd)
		if errors.Is(err, errNoMultipart) {
			rest = append(rest, d)
			continue
		}
		if err != nil {
			return 0, err
		}
		failures += failed
	}
	if len(rest) == 0 {
		return failures, nil
	}
	for i, d := range rest {
		// a target without multipart PUTs gets identity data
		id, err := couchdoc.IdentityInline(d)
		if err != nil {
			return 0, fmt.Errorf("replicator: %w", err)
		}
		rest[i] = id
	}
	failed, err := e.bulkDocs(ctx, rest)
	return failures + failed, err
}

// multipartDoc returns d in follows form when it goes as a multipart PUT.
// A doc with data in the replicator's encoded form (encodeAtts) always
// does: only a multipart part keeps the stored bytes and their digest.
func (e *HTTPEndpoint) multipartDoc(d []byte) *couchdoc.FollowsDoc {
	if !bytes.Contains(d, []byte(`"data":"`)) {
		return nil
	}
	encoded := bytes.Contains(d, []byte(`"encoded_length":`))
	if !encoded && (e.MultipartMin < 0 || len(d) < e.MultipartMin) {
		return nil
	}
	if e.noMultipart.Load() {
		return nil
	}
	fd, ok := couchdoc.InlineToFollows(d)
	if !ok || !fd.Encoded() && fd.DataLen < e.MultipartMin {
		return nil
	}
	return fd
}

// errNoMultipart: the peer does not take multipart PUTs (an old settee
// answers 400, a server that wants JSON 415); the doc goes as JSON.
var errNoMultipart = errors.New("replicator: the target does not take multipart documents")

// putMultipart writes one doc as PUT /db/doc?new_edits=false with a
// multipart/related body, decoding the base64 data as it is sent (the
// body is never held decoded). A refusal of the doc itself (403, 409,
// 412, 413) is a write failure, as CouchDB's replicator counts it.
func (e *HTTPEndpoint) putMultipart(ctx context.Context, fd *couchdoc.FollowsDoc) (int, error) {
	boundary := couchdoc.NewBoundary()
	head := couchdoc.RelatedHead(nil, boundary)
	heads := make([][]byte, len(fd.Atts))
	n := int64(len(head) + len(fd.JSON))
	for i, a := range fd.Atts {
		heads[i] = couchdoc.AttPartHead(nil, boundary, a.Name, a.ContentType, a.Encoding, a.Len)
		n += int64(len(heads[i]) + a.Len)
	}
	tail := couchdoc.RelatedTail(nil, boundary)
	n += int64(len(tail))
	b := &body{ctype: `multipart/related; boundary="` + boundary + `"`, n: n, open: func() io.Reader {
		rs := make([]io.Reader, 0, 3+2*len(fd.Atts))
		rs = append(rs, bytes.NewReader(head), bytes.NewReader(fd.JSON))
		for i, a := range fd.Atts {
			rs = append(rs, bytes.NewReader(heads[i]), couchdoc.NewBase64Reader(a.B64))
		}
		return io.MultiReader(append(rs, bytes.NewReader(tail))...)
	}}
	_, err := e.doBody(ctx, http.MethodPut, docPath(fd.ID), url.Values{"new_edits": {"false"}}, b)
	var he *HTTPError
	if err == nil {
		return 0, nil
	}
	if !errors.As(err, &he) || errors.Is(err, ErrNotFound) {
		return 0, err
	}
	switch he.Status {
	case 400, 415:
		e.noMultipart.Store(true)
		return 0, errNoMultipart
	case 403, 409, 412, 413:
		return 1, nil
	}
	// 401 included: credentials that stopped working crash the job (as a
	// _bulk_docs would) rather than skip the doc past the checkpoint
	return 0, err
}

var (
	bulkDocsHead = []byte(`{"new_edits":false,"docs":[`)
	bulkDocsTail = []byte("]}")
	comma        = []byte(",")
)

func (e *HTTPEndpoint) bulkDocs(ctx context.Context, docs [][]byte) (int, error) {
	// the body is sent from the docs where they are (slices of the
	// _bulk_get answers), not copied into one buffer first
	n := int64(len(bulkDocsHead) + len(bulkDocsTail))
	for i, d := range docs {
		n += int64(len(d))
		if i > 0 {
			n++
		}
	}
	body := &body{ctype: "application/json", n: n, open: func() io.Reader {
		bufs := make(net.Buffers, 0, 2*len(docs)+1)
		bufs = append(bufs, bulkDocsHead)
		for i, d := range docs {
			if i > 0 {
				bufs = append(bufs, comma)
			}
			bufs = append(bufs, d)
		}
		bufs = append(bufs, bulkDocsTail)
		return &bufs
	}}
	b, err := e.doBody(ctx, http.MethodPost, "/_bulk_docs", nil, body)
	if err != nil {
		return 0, err
	}
	var res []struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return 0, fmt.Errorf("%s: bad _bulk_docs answer: %w", e.name, jsonProblem(err))
	}
	failures := 0
	for _, r := range res {
		if r.Error != "" {
			failures++
		}
	}
	return failures, nil
}
