package httpgw

import (
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// byteRange is one satisfiable range of a Range header: [start, end].
type byteRange struct{ start, end int64 }

// parseRanges reads a Range header against a body of size bytes as
// CouchDB does: a header that is not "bytes=…" well formed is ignored
// (the whole body, 200), ranges past the end are dropped, and none left
// is unsatisfiable (416).
func parseRanges(h string, size int64) (rs []byteRange, ok bool) {
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !found {
		return nil, false
	}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		from, to, dash := strings.Cut(part, "-")
		if !dash {
			return nil, false
		}
		var r byteRange
		switch {
		case from == "": // the last n bytes
			n, err := strconv.ParseInt(to, 10, 64)
			if err != nil || n < 0 {
				return nil, false
			}
			if n == 0 || size == 0 {
				continue
			}
			r = byteRange{max(size-n, 0), size - 1}
		default:
			s, err := strconv.ParseInt(from, 10, 64)
			if err != nil || s < 0 {
				return nil, false
			}
			e := size - 1
			if to != "" {
				if e, err = strconv.ParseInt(to, 10, 64); err != nil || e < s {
					return nil, false
				}
			}
			if s >= size {
				continue
			}
			r = byteRange{s, min(e, size-1)}
		}
		rs = append(rs, r)
	}
	return rs, true
}

var errRange = newErr(416, "requested_range_not_satisfiable", "Requested range not satisfiable")

// writeRanges answers a Range request on an attachment of data (nil for
// HEAD) of size bytes; it reports false when the whole body is to be sent,
// errRange when no range is satisfiable.
func writeRanges(rq *req, ctype string, data []byte, size int64) (bool, error) {
	rh := rq.r.Header.Get("Range")
	if rh == "" {
		return false, nil
	}
	rs, ok := parseRanges(rh, size)
	if !ok {
		return false, nil
	}
	h := rq.w.Header()
	if len(rs) == 0 {
		h.Del("Content-Length")
		h.Del("Content-Type")
		return false, errRange
	}
	if len(rs) == 1 {
		r := rs[0]
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", r.start, r.end, size))
		h.Set("Content-Length", strconv.FormatInt(r.end-r.start+1, 10))
		rq.w.WriteHeader(http.StatusPartialContent)
		if data != nil {
			_, _ = rq.w.Write(data[r.start : r.end+1])
		}
		return true, nil
	}
	mw := multipart.NewWriter(rq.w)
	// CouchDB's multipart answer has headers of its own: none of the
	// attachment's ETag, Accept-Ranges and Cache-Control
	rawAnswer(rq)
	h.Del("Etag")
	h.Del("Accept-Ranges")
	h.Set("Content-Type", `multipart/byteranges; boundary="`+mw.Boundary()+`"`)
	h.Del("Content-Length")
	rq.w.WriteHeader(http.StatusPartialContent)
	if data == nil {
		return true, nil
	}
	for _, r := range rs {
		pw, err := mw.CreatePart(textproto.MIMEHeader{
			"Content-Type":  {ctype},
			"Content-Range": {fmt.Sprintf("bytes %d-%d/%d", r.start, r.end, size)},
		})
		if err != nil {
			return true, nil // the client went away
		}
		_, _ = pw.Write(data[r.start : r.end+1])
	}
	_ = mw.Close()
	return true, nil
}
