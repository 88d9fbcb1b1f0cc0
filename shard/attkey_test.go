package shard

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"github.com/settee/settee/actors"
	pb "github.com/settee/settee/proto"
)

// md5Pair is Wang and Yu's 2004 MD5 collision ("How to Break MD5 and Other
// Hash Functions"): two 128-byte messages that differ in six bytes and
// have the same MD5, 79054025255fb1a26e4bc422aef54eb4. mustCollide checks
// it, so that a test using it proves something.
var md5Pair = [2]string{
	"d131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f89" +
		"55ad340609f4b30283e488832571415a085125e8f7cdc99fd91dbdf280373c5b" +
		"d8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd02396306d248cda0" +
		"e99f33420f577ee8ce54b67080a80d1ec69821bcb6a8839396f9652b6ff72a70",
	"d131dd02c5e6eec4693d9a0698aff95c2fcab50712467eab4004583eb8fb7f89" +
		"55ad340609f4b30283e4888325f1415a085125e8f7cdc99fd91dbd7280373c5b" +
		"d8823e3156348f5bae6dacd436c919c6dd53e23487da03fd02396306d248cda0" +
		"e99f33420f577ee8ce54b67080280d1ec69821bcb6a8839396f965ab6ff72a70",
}

// mustCollide returns the pair's bytes and their common CouchDB digest,
// failing unless the bytes differ and their MD5s are equal.
func mustCollide(t *testing.T) (m1, m2 []byte, digest string) {
	t.Helper()
	m1, err1 := hex.DecodeString(md5Pair[0])
	m2, err2 := hex.DecodeString(md5Pair[1])
	if err1 != nil || err2 != nil || len(m1) != 128 || len(m2) != 128 {
		t.Fatalf("bad pair: %v %v", err1, err2)
	}
	s1, s2 := md5.Sum(m1), md5.Sum(m2)
	if bytes.Equal(m1, m2) || s1 != s2 {
		t.Fatalf("not an MD5 collision: %x %x", s1, s2)
	}
	return m1, m2, "md5-" + base64.StdEncoding.EncodeToString(s1[:])
}

func attUpdate(id, rev string, name string, data []byte, digest string) *pb.DocUpdate {
	return &pb.DocUpdate{Id: id, Rev: rev, Body: []byte(`{}`), HasAtts: true, Atts: []*pb.Att{{
		Name: name, ContentType: "application/octet-stream", Data: data, Digest: digest, Length: uint64(len(data))}}}
}

// attOf reads doc id's winner's attachment name both ways the server
// does: the revision with its data (a doc GET with attachments, internal
// replication), and GetAtt by the record (an attachment GET).
func (f *fixture) attOf(id, name string) (inline, byKey []byte) {
	f.t.Helper()
	ctx := context.Background()
	r, err := actors.Ask[*pb.DocReply](ctx, f.sys.Root, f.pid, &pb.GetDoc{Id: id, WithAttsData: true})
	if err != nil || r.Error != nil || len(r.Bodies) != 1 {
		f.t.Fatalf("get %s: %v %v", id, r, err)
	}
	b := r.Bodies[0]
	for i, a := range b.Atts {
		if a.Name != name {
			continue
		}
		ar, err := actors.Ask[*pb.AttReply](ctx, f.sys.Root, f.pid, &pb.GetAtt{Digest: a.Digest, Sha256: a.Sha256})
		if err != nil || ar.Error != nil {
			f.t.Fatalf("GetAtt %s/%s: %v %v", id, name, ar, err)
		}
		return b.AttData[i], ar.Data
	}
	f.t.Fatalf("%s has no attachment %s", id, name)
	return nil, nil
}

func (f *fixture) wantAtt(when, id, name string, want []byte) {
	f.t.Helper()
	inline, byKey := f.attOf(id, name)
	if !bytes.Equal(inline, want) || !bytes.Equal(byKey, want) {
		f.t.Errorf("%s: %s/%s is %x (inline) and %x (GetAtt), want %x", when, id, name, inline, byKey, want)
	}
}

// attKeys lists the shard's attachment data keys.
func (f *fixture) attKeys() map[string]bool {
	f.t.Helper()
	keys, err := f.st().attDigests()
	if err != nil {
		f.t.Fatal(err)
	}
	return keys
}

func (f *fixture) st() *store { return newStore(f.cfg) }

// restart stops the shard's actor and starts it again on the same store.
func (f *fixture) restart() {
	f.t.Helper()
	if err := f.sys.Root.PoisonFuture(f.pid).Wait(); err != nil {
		f.t.Fatal(err)
	}
	f.pid = f.sys.Root.Spawn(Props(f.cfg))
}

// TestAttachmentsWithCollidingMD5KeptApart: two docs whose attachments'
// bytes differ but have the same MD5 (so the same CouchDB digest) each
// keep their own bytes: the second write must not replace what the first
// doc serves, before and after compaction, after a restart, and through
// an edit that keeps the attachment as a stub.
func TestAttachmentsWithCollidingMD5KeptApart(t *testing.T) {
	m1, m2, digest := mustCollide(t)
	f := newFixture(t)
	ra := f.update(true, attUpdate("a", "", "f", m1, digest))
	rb := f.update(true, attUpdate("b", "", "f", m2, digest))
	if code(ra[0]) != "ok" || code(rb[0]) != "ok" {
		t.Fatalf("writes: %v %v", ra, rb)
	}
	check := func(when string) {
		t.Helper()
		f.wantAtt(when, "a", "f", m1)
		f.wantAtt(when, "b", "f", m2)
	}
	check("written")
	if got := f.get("a").Bodies[0].Atts[0]; got.Digest != digest || len(got.Sha256) != 32 {
		t.Errorf("record %v: want the md5 digest and a sha256", got)
	}
	if keys := f.attKeys(); len(keys) != 2 || keys[digest] {
		t.Errorf("attachment keys %v: want two sha256 keys and no md5 one", keys)
	}
	f.compact()
	check("compacted")
	f.restart()
	check("restarted")

	// an edit of a keeping its attachment as a stub refers to the same data
	a := f.get("a")
	r := f.update(true, &pb.DocUpdate{Id: "a", Rev: a.Info.Winner, Body: []byte(`{"v":2}`), HasAtts: true,
		Atts: []*pb.Att{{Name: "f", Stub: true}}})
	if code(r[0]) != "ok" {
		t.Fatalf("stub edit: %v", r)
	}
	check("stub edit")
	f.compact()
	check("stub edit compacted")

	// b's deletion lets compaction sweep b's data and only b's
	b := f.get("b")
	if r := f.update(true, &pb.DocUpdate{Id: "b", Rev: b.Info.Winner, Deleted: true, Body: []byte(`{}`)}); code(r[0]) != "ok" {
		t.Fatalf("delete b: %v", r)
	}
	f.compact()
	f.wantAtt("b deleted and compacted", "a", "f", m1)
	if keys := f.attKeys(); len(keys) != 1 {
		t.Errorf("after b's deletion and compaction: attachment keys %v, want a's alone", keys)
	}
}

// TestAttachmentsStoredUnderMD5StillRead: data an older settee stored
// under its digest (att/md5-…, a record without sha256) is still read,
// kept by compaction while referenced, swept when not, and a later write
// of colliding bytes to another doc does not replace it.
func TestAttachmentsStoredUnderMD5StillRead(t *testing.T) {
	m1, m2, digest := mustCollide(t)
	f := newFixture(t)
	ra := f.update(true, attUpdate("a", "", "f", m1, digest))
	if code(ra[0]) != "ok" {
		t.Fatalf("write: %v", ra)
	}
	// make the store what an older settee wrote: the record without
	// sha256, the data under the digest
	if err := f.sys.Root.PoisonFuture(f.pid).Wait(); err != nil {
		t.Fatal(err)
	}
	k, st := newKeys(f.cfg.Handle), f.st()
	if err := f.cfg.DB.Update(func(txn *badger.Txn) error {
		body, err := st.body(txn, "a", ra[0].Rev)
		if err != nil || body == nil {
			return errors.Join(err, errors.New("no body"))
		}
		old := attKey(body.Atts[0])
		body.Atts[0].Sha256 = nil
		bb, err := proto.Marshal(body)
		if err != nil {
			return err
		}
		if err := txn.Set(k.body("a", ra[0].Rev), bb); err != nil {
			return err
		}
		if err := txn.Delete(k.att(old)); err != nil {
			return err
		}
		return txn.Set(k.att(digest), m1)
	}); err != nil {
		t.Fatal(err)
	}
	f.pid = f.sys.Root.Spawn(Props(f.cfg))
	if got := f.get("a").Bodies[0].Atts[0]; len(got.Sha256) != 0 {
		t.Fatalf("record not in the old form: %v", got)
	}
	f.wantAtt("old record", "a", "f", m1)

	// another doc's colliding bytes go under their own key
	if r := f.update(true, attUpdate("b", "", "f", m2, digest)); code(r[0]) != "ok" {
		t.Fatalf("write b: %v", r)
	}
	f.wantAtt("b written", "a", "f", m1)
	f.wantAtt("b written", "b", "f", m2)
	f.compact()
	f.wantAtt("compacted", "a", "f", m1)
	f.wantAtt("compacted", "b", "f", m2)
	if keys := f.attKeys(); len(keys) != 2 || !keys[digest] {
		t.Errorf("attachment keys %v: want a's md5 key and b's sha256 one", keys)
	}

	// a stub edit keeps referring to the old key
	a := f.get("a")
	if r := f.update(true, &pb.DocUpdate{Id: "a", Rev: a.Info.Winner, Body: []byte(`{"v":2}`), HasAtts: true,
		Atts: []*pb.Att{{Name: "f", Stub: true}}}); code(r[0]) != "ok" {
		t.Fatalf("stub edit: %v", r)
	}
	f.compact()
	f.wantAtt("stub edit compacted", "a", "f", m1)

	// a's deletion lets compaction sweep the old key
	a = f.get("a")
	if r := f.update(true, &pb.DocUpdate{Id: "a", Rev: a.Info.Winner, Deleted: true, Body: []byte(`{}`)}); code(r[0]) != "ok" {
		t.Fatalf("delete a: %v", r)
	}
	f.compact()
	if keys := f.attKeys(); len(keys) != 1 || keys[digest] {
		t.Errorf("after a's deletion: attachment keys %v, want b's alone", keys)
	}
	f.wantAtt("a deleted", "b", "f", m2)
}

// TestGetAttFallsBackToDigestOnlyForTheSameBytes: a record with a sha256
// read from another copy may name data this copy stored under its digest
// before it kept sha256 keys; the data there is served only when it has
// the record's sha256 (it may be another doc's colliding bytes).
func TestGetAttFallsBackToDigestOnlyForTheSameBytes(t *testing.T) {
	m1, m2, digest := mustCollide(t)
	f := newFixture(t)
	if r := f.update(true, attUpdate("a", "", "f", m1, digest)); code(r[0]) != "ok" {
		t.Fatalf("write: %v", r)
	}
	meta := f.get("a").Bodies[0].Atts[0]
	k := newKeys(f.cfg.Handle)
	get := func() *pb.AttReply {
		r, err := actors.Ask[*pb.AttReply](context.Background(), f.sys.Root, f.pid, &pb.GetAtt{Digest: meta.Digest, Sha256: meta.Sha256})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	set := func(key string, v []byte) {
		t.Helper()
		if err := f.cfg.DB.Update(func(txn *badger.Txn) error {
			if v == nil {
				return txn.Delete(k.att(key))
			}
			return txn.Set(k.att(key), v)
		}); err != nil {
			t.Fatal(err)
		}
	}
	set(attKey(meta), nil)
	set(digest, m2)
	if r := get(); r.Error == nil || r.Error.Code != ErrNotFound.Code {
		t.Errorf("colliding bytes under the digest served for the record's sha256: %x %v", r.Data, r.Error)
	}
	set(digest, m1)
	if r := get(); r.Error != nil || !bytes.Equal(r.Data, m1) {
		t.Errorf("the record's bytes under the digest: %x %v", r.Data, r.Error)
	}
}
