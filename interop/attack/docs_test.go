package attack

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"mime/multipart"
	"strings"
)

// refusingVDU refuses a doc with forbidden set, an id starting with
// "bad", or an attachment bad.txt; its _update handler writes a
// forbidden doc.
const refusingVDU = `{"validate_doc_update":"function(n,o,u){ if (n.forbidden || n._id.indexOf('bad') === 0 || (n._attachments && n._attachments['bad.txt'])) throw({forbidden:'refused by the VDU'}); }",
 "updates":{"u":"function(doc,req){ return [{_id:'fromupdate', forbidden:true}, 'written']; }"}}`

// vduDB is a database whose members are a (and b), with the refusing
// VDU and one doc "ok"; e.v["db"], e.v["okrev"].
func vduDB(e *env, members ...string) {
	e.t.Helper()
	if len(members) == 0 {
		members = []string{e.a.name}
	}
	db := e.db("vdu", members, nil)
	e.put(db, "_design/vdu", refusingVDU)
	e.v["db"], e.v["okrev"] = db, e.put(db, "ok", map[string]any{"v": 1})
}

// noForbidden reads every doc of e.v["db"] with every leaf of it: none
// may be forbidden, named bad…, carry bad.txt, or come from the update
// handler.
func noForbidden(e *env) {
	e.t.Helper()
	db := e.v["db"]
	all := e.get(e.tg.admin, "/"+db+"/_all_docs")
	for _, row := range all["rows"].([]any) {
		id := row.(map[string]any)["id"].(string)
		if strings.HasPrefix(id, "bad") || id == "fromupdate" {
			e.t.Errorf("%s/%s was written", db, id)
		}
		if strings.HasPrefix(id, "_design/") {
			continue
		}
		r := e.admin("GET", "/"+db+"/"+id+"?open_revs=all&revs=true", nil)
		if r.status != 200 {
			e.t.Fatalf("read back: %s", r)
		}
		if s := string(r.body); strings.Contains(s, `"forbidden"`) || strings.Contains(s, "bad.txt") {
			e.t.Errorf("a refused revision is stored: %s", r)
		}
	}
}

// bulkErr checks the n-th result of a _bulk_docs answer is one of errs.
func bulkErr(e *env, r response, n int, errs ...string) {
	e.t.Helper()
	var rows []map[string]any
	if err := jsonUnmarshal(r.body, &rows); err != nil || r.status != 201 {
		e.t.Errorf("want 201 and rows: %s", r)
		return
	}
	for _, row := range rows {
		if n == 0 {
			for _, want := range errs {
				if row["error"] == want {
					return
				}
			}
			e.t.Errorf("result %v: want error %v: %s", row, errs, r)
			return
		}
		n--
	}
	e.t.Errorf("no result %d: want error %v: %s", n, errs, r)
}

// revOf is the rev the body gets as a new doc: revs are a hash of the
// content, the same on every server; read from a scratch database.
func revOf(e *env, id, body string) string {
	e.t.Helper()
	scratch := e.db("scratch", nil, nil)
	rev := e.put(scratch, id, body)
	e.must("DELETE", "/"+scratch, nil)
	return rev
}

// md5 colliding pair: X. Wang, D. Feng, X. Lai, H. Yu, "Collisions for
// Hash Functions MD4, MD5, HAVAL-128 and RIPEMD" (2004).
const (
	wangA = "d131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f89" +
		"55ad340609f4b30283e488832571415a085125e8f7cdc99fd91dbdf280373c5b" +
		"d8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd02396306d248cda0" +
		"e99f33420f577ee8ce54b67080a80d1ec69821bcb6a8839396f9652b6ff72a70"
	wangB = "d131dd02c5e6eec4693d9a0698aff95c2fcab50712467eab4004583eb8fb7f89" +
		"55ad340609f4b30283e4888325f1415a085125e8f7cdc99fd91dbd7280373c5b" +
		"d8823e3156348f5bae6dacd436c919c6dd53e23487da03fd02396306d248cda0" +
		"e99f33420f577ee8ce54b67080280d1ec69821bcb6a8839396f965ab6ff72a70"
)

func writePath(name, family string, send func(e *env) response, want ...any) attackCase {
	return attackCase{name: "vdu-" + name, role: "member", family: family,
		setup: func(e *env) { vduDB(e) },
		attack: func(e *env) {
			r := send(e)
			if len(want) > 0 {
				e.refused(r, want...)
			}
		},
		readBack: noForbidden}
}

func init() {
	addGroup("docs",
		writePath("put", "", func(e *env) response {
			return e.req(e.a, "PUT", "/"+e.v["db"]+"/x", `{"forbidden":true}`)
		}, 403, "forbidden"),
		writePath("post", "", func(e *env) response {
			return e.req(e.a, "POST", "/"+e.v["db"], `{"forbidden":true}`)
		}, 403, "forbidden"),
		writePath("copy", "", func(e *env) response {
			return e.req(e.a, "COPY", "/"+e.v["db"]+"/ok", nil, "Destination", "bad-copy")
		}, 403, "forbidden"),
		writePath("attachment-put", "", func(e *env) response {
			return e.req(e.a, "PUT", "/"+e.v["db"]+"/ok/bad.txt?rev="+e.v["okrev"], "hello", "Content-Type", "text/plain")
		}, 403, "forbidden"),
		writePath("update-handler", "", func(e *env) response {
			return e.req(e.a, "POST", "/"+e.v["db"]+"/_design/vdu/_update/u", "")
		}, 403, "forbidden"),
		writePath("form-attachment", "", func(e *env) response {
			var b bytes.Buffer
			mw := multipart.NewWriter(&b)
			_ = mw.WriteField("_rev", e.v["okrev"])
			fw, _ := mw.CreateFormFile("_attachments", "bad.txt")
			_, _ = fw.Write([]byte("hello"))
			_ = mw.Close()
			return e.req(e.a, "POST", "/"+e.v["db"]+"/ok", b.Bytes(), "Content-Type", mw.FormDataContentType(), "Referer", e.tg.url+"/")
		}, 403, "forbidden"),
		writePath("bulk-docs", "", func(e *env) response {
			r := e.req(e.a, "POST", "/"+e.v["db"]+"/_bulk_docs", `{"docs":[{"_id":"x","forbidden":true},{"_id":"bad1"}]}`)
			bulkErr(e, r, 0, "forbidden")
			bulkErr(e, r, 1, "forbidden")
			return r
		}),
		writePath("bulk-docs-new-edits-false", "", func(e *env) response {
			r := e.req(e.a, "POST", "/"+e.v["db"]+"/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"z","_rev":"1-abc","forbidden":true}]}`)
			bulkErr(e, r, 0, "forbidden")
			return r
		}),
		writePath("bulk-docs-new-edits-false-repeated-id", "", func(e *env) response {
			r := e.req(e.a, "POST", "/"+e.v["db"]+"/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"w","_rev":"1-aaa","v":1},{"_id":"w","_rev":"1-bbb","forbidden":true}]}`)
			bulkErr(e, r, 0, "forbidden")
			return r
		}),
		writePath("bulk-docs-new-edits-false-existing", "", func(e *env) response {
			r := e.req(e.a, "POST", "/"+e.v["db"]+"/_bulk_docs", `{"new_edits":false,"docs":[{"_id":"ok","_rev":"2-bbb","_revisions":{"start":2,"ids":["bbb","`+strings.TrimPrefix(e.v["okrev"], "1-")+`"]},"forbidden":true}]}`)
			bulkErr(e, r, 0, "forbidden")
			return r
		}),
		attackCase{name: "3-bulk-repeated-id-next-rev", role: "member", family: "3",
			setup: func(e *env) { vduDB(e) },
			attack: func(e *env) {
				body := `{"owner":"a","v":1}`
				rev := revOf(e, "t", body)
				r := e.req(e.a, "POST", "/"+e.v["db"]+"/_bulk_docs", `{"docs":[{"_id":"t","owner":"a","v":1},{"_id":"t","_rev":"`+rev+`","forbidden":true}]}`)
				bulkErr(e, r, 1, "conflict", "forbidden")
			},
			readBack: func(e *env) {
				noForbidden(e)
				if d := e.get(e.tg.admin, "/"+e.v["db"]+"/t"); d["v"] != 1.0 || d["forbidden"] != nil {
					e.t.Errorf("t is %v, want v:1 without forbidden", d)
				}
			}},
		attackCase{name: "3-bulk-repeated-id-after-delete", role: "member", family: "3",
			setup: func(e *env) {
				vduDB(e)
				e.v["yrev"] = e.put(e.v["db"], "y", map[string]any{"v": 1})
			},
			attack: func(e *env) {
				r := e.req(e.a, "POST", "/"+e.v["db"]+"/_bulk_docs", `{"docs":[{"_id":"y","_rev":"`+e.v["yrev"]+`","_deleted":true},{"_id":"y","forbidden":true}]}`)
				bulkErr(e, r, 1, "conflict", "forbidden")
			},
			readBack: noForbidden},

		attackCase{name: "2-attachment-csp", role: "member", family: "2",
			setup: func(e *env) { vduDB(e) },
			attack: func(e *env) {
				rev := e.v["okrev"]
				for _, a := range []struct{ name, typ, body string }{
					{"x.html", "text/html", "<script>alert(document.cookie)</script>"},
					{"x.svg", "image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.cookie)</script></svg>`},
				} {
					r := e.req(e.a, "PUT", "/"+e.v["db"]+"/ok/"+a.name+"?rev="+rev, a.body, "Content-Type", a.typ)
					if r.status != 201 {
						e.t.Fatalf("setup: %s", r)
					}
					rev = r.json()["rev"].(string)
					for _, w := range []who{e.a, e.tg.admin} {
						g := e.req(w, "GET", "/"+e.v["db"]+"/ok/"+a.name, nil)
						if g.status != 200 || !strings.Contains(strings.ToLower(g.hdr.Get("Content-Security-Policy")), "sandbox") {
							e.t.Errorf("want Content-Security-Policy: sandbox: %s; headers %v", g, g.hdr)
						}
					}
				}
			}},

		attackCase{name: "8-md5-collision", role: "member", family: "8",
			setup: func(e *env) {
				e.v["db"] = e.db("md5", []string{e.a.name, e.b.name}, nil, "q=1")
			},
			attack: func(e *env) {
				a, _ := hex.DecodeString(wangA)
				b, _ := hex.DecodeString(wangB)
				if md5.Sum(a) != md5.Sum(b) || bytes.Equal(a, b) || len(a) != 128 {
					e.t.Fatalf("the pair is no MD5 collision")
				}
				db := e.v["db"]
				for _, x := range []struct {
					w    who
					doc  string
					data []byte
				}{{e.a, "a", a}, {e.b, "b", b}} {
					r := e.req(x.w, "PUT", "/"+db+"/"+x.doc+"/m", x.data, "Content-Type", "application/octet-stream")
					if r.status != 201 {
						e.t.Fatalf("%s", r)
					}
				}
			},
			readBack: func(e *env) {
				a, _ := hex.DecodeString(wangA)
				b, _ := hex.DecodeString(wangB)
				for _, x := range []struct {
					doc  string
					want []byte
				}{{"a", a}, {"b", b}} {
					r := e.req(e.a, "GET", "/"+e.v["db"]+"/"+x.doc+"/m", nil)
					if r.status != 200 || !bytes.Equal(r.body, x.want) {
						e.t.Errorf("%s/m: got %d %x, want %x", x.doc, r.status, r.body, x.want)
					}
				}
			}},

		utf8Case("local", "10", "PUT", "/_local/%ff%fe", `{}`, 400, "illegal_docid"),
		utf8Case("doc", "", "PUT", "/%ff%fe", `{}`, 400, "illegal_docid"),
		utf8Case("design", "", "PUT", "/_design/%ff", `{}`, 400, "illegal_docid"),
		utf8Case("body-id", "", "POST", "", "{\"_id\":\"\xff\xfe\"}", 400, "bad_request"),
		utf8Case("bulk-id", "", "POST", "/_bulk_docs", "{\"docs\":[{\"_id\":\"\xff\"}]}", 400, "bad_request"),
		utf8Case("copy-destination", "", "COPY", "/ok", nil, 400, "illegal_docid", 400, "bad_request"),
	)
}

func utf8Case(name, family, method, path string, body any, want ...any) attackCase {
	return attackCase{name: "10-utf8-" + name, role: "dbadmin", family: family,
		setup: func(e *env) {
			e.v["db"] = e.db("utf8", nil, []string{e.a.name})
			e.put(e.v["db"], "ok", map[string]any{"v": 1})
		},
		attack: func(e *env) {
			r := e.req(e.a, method, "/"+e.v["db"]+path, body, "Destination", "%ff%fe")
			e.refused(r, want...)
		},
		readBack: func(e *env) {
			for _, p := range []string{"/_all_docs", "/_local_docs"} {
				all := e.get(e.tg.admin, "/"+e.v["db"]+p)
				if rows := all["rows"].([]any); len(rows) > 1 || (p == "/_local_docs" && len(rows) > 0) {
					e.t.Errorf("%s%s: %v", e.v["db"], p, rows)
				}
			}
		}}
}
