package replicator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/settee/settee/couchdoc"
	"github.com/settee/settee/docjson"
	"github.com/settee/settee/internal/couchpath"
)

// encodeAtts rewrites the inline attachments of a fetched doc that the
// source stores encoded (gzip, as CouchDB and settee store compressible
// types) into the replicator's encoded form (couchdoc.Options.EncodedData):
// the stored bytes, fetched as they are with Accept-Encoding: gzip, with
// their encoding and digest. The target then stores those bytes and that
// digest, as CouchDB's replicator makes it do through multipart, instead
// of compressing the identity data again into other bytes with another
// digest: the digest is an input of the revision hash, and clients
// compare it. An attachment whose stored bytes cannot be had (the source
// answers identity, or they do not match the digest) goes as identity
// data without its encoding, as before.
func (e *HTTPEndpoint) encodeAtts(ctx context.Context, id string, doc []byte) []byte {
	if !bytes.Contains(doc, []byte(`"encoding"`)) || !bytes.Contains(doc, []byte(`"data"`)) {
		return doc
	}
	var rev string
	attsStart, attsEnd := -1, -1
	ok := couchdoc.WalkObject(doc, 0, func(key []byte, vs, ve int) bool {
		switch string(key) {
		case `"_rev"`:
			return json.Unmarshal(doc[vs:ve], &rev) == nil
		case `"_attachments"`:
			attsStart, attsEnd = vs, ve
		}
		return true
	})
	if !ok || attsStart < 0 || rev == "" {
		return doc
	}
	out := make([]byte, 0, len(doc))
	out = append(out, doc[:attsStart]...)
	out = append(out, '{')
	first := true
	ok = couchdoc.WalkObject(doc, attsStart, func(name []byte, vs, ve int) bool {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, name...)
		out = append(out, ':')
		var a struct {
			ContentType string  `json:"content_type"`
			Revpos      uint64  `json:"revpos"`
			Digest      string  `json:"digest"`
			Data        *string `json:"data"`
			Encoding    string  `json:"encoding"`
		}
		var n string
		if json.Unmarshal(doc[vs:ve], &a) != nil || json.Unmarshal(name, &n) != nil {
			return false
		}
		if a.Data == nil || a.Encoding == "" {
			out = append(out, doc[vs:ve]...) // a stub, or identity data
			return true
		}
		identity, err := base64.StdEncoding.DecodeString(*a.Data)
		if err != nil {
			return false
		}
		out = append(out, `{"content_type":`...)
		out = docjson.AppendString(out, a.ContentType)
		out = append(out, `,"revpos":`...)
		out = strconv.AppendUint(out, a.Revpos, 10)
		stored := e.storedAtt(ctx, id, n, rev, a.Encoding)
		if stored != nil && couchdoc.Digest(stored) == a.Digest {
			out = append(out, `,"digest":`...)
			out = docjson.AppendString(out, a.Digest)
			out = append(out, `,"data":"`...)
			out = base64.StdEncoding.AppendEncode(out, stored)
			out = append(out, `","length":`...)
			out = strconv.AppendInt(out, int64(len(identity)), 10)
			out = append(out, `,"encoding":`...)
			out = docjson.AppendString(out, a.Encoding)
			out = append(out, `,"encoded_length":`...)
			out = strconv.AppendInt(out, int64(len(stored)), 10)
			out = append(out, '}')
			return true
		}
		if e.Log != nil {
			e.Log.Debug("replicator: attachment sent as identity data", "doc", id, "attachment", n)
		}
		out = append(out, `,"data":`...)
		out = docjson.AppendString(out, *a.Data)
		out = append(out, '}')
		return true
	})
	if !ok {
		return doc
	}
	out = append(out, '}')
	return append(out, doc[attsEnd:]...)
}

// storedAtt reads an attachment's stored bytes (encoded as encoding says)
// from the source, with the endpoint's retries and timeout; nil when the
// source will not answer them so.
func (e *HTTPEndpoint) storedAtt(ctx context.Context, id, name, rev, encoding string) []byte {
	path := docPath(id) + "/" + couchpath.Escape(name)
	// Accept-Encoding set by hand: the transport hands the bytes over
	// undecoded
	resp, _, err := e.request(ctx, http.MethodGet, path, url.Values{"rev": {rev}}, nil, true, http.Header{"Accept-Encoding": {encoding}})
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != encoding {
		return nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil
	}
	return b
}
