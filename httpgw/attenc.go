package httpgw

import (
	"bytes"
	"compress/gzip"
	"strings"

	pb "github.com/settee/settee/proto"
)

// CouchDB stores attachments of compressible types gzipped ([attachments]
// compressible_types, compression_level 8): less disk, and a client that
// accepts gzip gets the stored bytes as they are. The digest is of the
// stored (encoded) bytes, as in CouchDB.
var compressibleTypes = []string{"text/", "application/javascript", "application/json", "application/xml"}

const compressionLevel = 8

func compressible(contentType string) bool {
	ct := strings.ToLower(strings.TrimSpace(contentType))
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = strings.TrimSpace(ct[:i])
	}
	for _, t := range compressibleTypes {
		if strings.HasSuffix(t, "/") && strings.HasPrefix(ct, t) || ct == t {
			return true
		}
	}
	return false
}

// newAtt builds a new attachment from identity data, gzipping it when its
// type is compressible (always, as CouchDB: even tiny texts report
// "encoding":"gzip").
func newAtt(name, contentType string, data []byte) *pb.Att {
	a := &pb.Att{Name: name, ContentType: contentType, Data: data, Length: uint64(len(data))}
	if compressible(contentType) && len(data) > 0 {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, compressionLevel)
		if err == nil {
			_, err = zw.Write(data)
		}
		if err == nil {
			err = zw.Close()
		}
		if err == nil {
			a.Data, a.Encoding, a.EncodedLength = buf.Bytes(), "gzip", uint64(buf.Len())
		}
	}
	a.Digest = digestOf(a.Data)
	return a
}
