package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/settee/settee/docjson"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/rights"
)

// The _replicator database as CouchDB 3.5 secures it
// (couch_replicator_docs): every doc records its owner, the user who
// wrote it; only that user or an admin of the database may change it; a
// reader who is neither sees the doc without the credentials in its
// source and target. The job runs as its owner (the scheduler reads the
// owner back; see Owner).

const ownerField = "owner"

var errOtherOwner = &pb.Error{Code: "forbidden", Reason: "Can't update replication documents from other users."}

// checkReplicatorWrite sets a written doc's owner to its writer, as
// CouchDB's before_doc_update does: a doc without one gets the writer's
// name; one naming another user is refused unless the writer is an admin
// of _replicator (an admin's null owner becomes the admin's name). A
// writer who is not a server admin may not name local databases (CouchDB
// 3 refuses them to everyone; settee keeps them for server admins).
func (p *Policy) checkReplicatorWrite(ctx context.Context, s *Subject, u *pb.DocUpdate) error {
	d, err := rights.ParseReplicatorDoc(u.Body)
	if err != nil {
		return nil // not an object: the write refuses it
	}
	name := ""
	if s != nil {
		name = s.Name
	}
	if !u.Deleted && (s == nil || !s.ServerAdmin) && (isLocal(d.Source) || isLocal(d.Target)) {
		return errLocalEndpoints
	}
	switch {
	case !d.HasOwner:
		// appended, so the writer's members keep their order
		end := bytes.LastIndexByte(u.Body, '}')
		b := append([]byte(nil), u.Body[:end]...)
		if bytes.IndexByte(b, ':') >= 0 {
			b = append(b, ',')
		}
		b = append(b, `"owner":`...)
		if name == "" {
			b = append(b, "null"...)
		} else {
			b = docjson.AppendString(b, name)
		}
		u.Body, u.RevHash = append(b, '}'), ""
		return nil
	case d.Owner == name && name != "":
		return nil
	case p.IsDBAdmin(ctx, s, ReplicatorDB):
		if d.Owner == "" {
			var m map[string]json.RawMessage
			if json.Unmarshal(u.Body, &m) != nil {
				return nil
			}
			return p.setOwner(u, m, name)
		}
		return nil
	}
	return errOtherOwner
}

var errLocalEndpoints = &pb.Error{Code: "forbidden", Reason: "local_endpoints_not_supported"}

// isLocal: an endpoint named by a database name, not a URL.
func isLocal(e rights.Endpoint) bool {
	u := strings.ToLower(e.URL)
	return e.URL != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://")
}

func (p *Policy) setOwner(u *pb.DocUpdate, m map[string]json.RawMessage, name string) error {
	if name == "" {
		m[ownerField] = json.RawMessage("null")
	} else {
		b, _ := json.Marshal(name)
		m[ownerField] = b
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	u.Body, u.RevHash = body, ""
	return nil
}

// Owner is the owner a _replicator doc's body records ("" for none),
// read as the write rules read it (package rights).
func Owner(body []byte) string {
	d, err := rights.ParseReplicatorDoc(body)
	if err != nil {
		return ""
	}
	return d.Owner
}

var urlCreds = regexp.MustCompile(`^(https?://)(?:[^:@/]+):[^@/]+@(.*)$`)

// stripCredentials is a _replicator doc as a reader who is not its owner
// sees it: user:password@ gone from source and target URLs, and their
// headers and auth members dropped (CouchDB's strip_credentials).
func stripCredentials(body []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return body
	}
	for _, k := range []string{"source", "target"} {
		raw, ok := m[k]
		if !ok {
			continue
		}
		var url string
		if json.Unmarshal(raw, &url) == nil {
			b, _ := json.Marshal(urlCreds.ReplaceAllString(url, "$1$2"))
			m[k] = b
			continue
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil {
			delete(obj, "headers")
			delete(obj, "auth")
			if u, ok := obj["url"]; ok {
				var s string
				if json.Unmarshal(u, &s) == nil {
					obj["url"], _ = json.Marshal(urlCreds.ReplaceAllString(s, "$1$2"))
				}
			}
			m[k], _ = json.Marshal(obj)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}
