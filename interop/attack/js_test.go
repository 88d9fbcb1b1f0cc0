package attack

import (
	"fmt"
	"runtime"
	"strings"
)

// spread is how many design docs run a function: a server may keep a
// pool of JavaScript runtimes (settee: 2×GOMAXPROCS), and each new
// view's build takes one; enough ddocs, queried one after another, reach
// every runtime of the pool.
func spread() int { return 2*runtime.GOMAXPROCS(0) + 2 }

// views writes spread() design docs named prefix0… in db as w, each
// with one view of mapSrc, queries each, and answers the answers.
func views(e *env, w who, db, prefix, mapSrc string) []response {
	e.t.Helper()
	var out []response
	for i := range spread() {
		dd := fmt.Sprintf("/%s/_design/%s%d", db, prefix, i)
		e.ok(e.req(w, "PUT", dd, map[string]any{"views": map[string]any{"v": map[string]any{"map": mapSrc}}}))
		r := e.req(w, "GET", dd+"/_view/v", nil)
		e.ok(r)
		out = append(out, r)
	}
	return out
}

// attack 6: one design doc's JavaScript must not change what another's
// sees: prototypes and globals stay the ddoc's own.
func init() {
	addGroup("js",
		attackCase{name: "6-array-prototype", role: "dbadmin", family: "6",
			setup: func(e *env) {
				e.v["A"] = e.db("a", nil, []string{e.a.name})
				e.put(e.v["A"], "d", map[string]any{"v": 1})
				e.v["B"] = e.db("b", []string{e.a.name}, nil)
				e.put(e.v["B"], "_design/check", map[string]any{"validate_doc_update": `function(newDoc){ if (["yes"].indexOf(newDoc.allowed) < 0) throw({forbidden:"no"}); }`})
			},
			attack: func(e *env) {
				views(e, e.a, e.v["A"], "evil", `function(doc){ Array.prototype.indexOf = function(){ return 0; }; emit(doc._id, 1); }`)
				for i := range 40 {
					allowed := "yes"
					if i%2 == 1 {
						allowed = "no"
					}
					r := e.req(e.a, "PUT", fmt.Sprintf("/%s/d%d", e.v["B"], i), map[string]any{"allowed": allowed})
					if allowed == "no" {
						e.refused(r, 403, "forbidden")
					} else {
						e.ok(r)
					}
				}
			},
			readBack: func(e *env) {
				all := e.get(e.tg.admin, "/"+e.v["B"]+"/_all_docs?include_docs=true")
				if s := fmt.Sprint(all["rows"]); strings.Contains(s, "allowed:no") {
					e.t.Errorf("B holds refused docs: %s", s)
				}
			}},
		attackCase{name: "6-global-between-ddocs", role: "dbadmin", family: "6",
			setup: func(e *env) {
				e.v["A"] = e.db("a", nil, []string{e.a.name})
				e.put(e.v["A"], "d", map[string]any{"v": 1})
				e.v["B"] = e.db("b", nil, []string{e.b.name})
				e.put(e.v["B"], "d", map[string]any{"v": 1})
			},
			attack: func(e *env) {
				g := strings.ReplaceAll("leaked_"+e.id, "-", "_")
				views(e, e.a, e.v["A"], "set", `function(doc){ `+g+` = "from A"; emit(doc._id, 1); }`)
				for _, r := range views(e, e.b, e.v["B"], "get", `function(doc){ emit(doc._id, typeof `+g+` === "undefined" ? null : `+g+`); }`) {
					if strings.Contains(string(r.body), "from A") {
						e.t.Errorf("B's map reads A's global: %s", r)
					}
				}
			}},
		attackCase{name: "6-global-object-escape", role: "dbadmin", family: "6",
			setup: func(e *env) {
				e.v["A"] = e.db("a", nil, []string{e.a.name})
				e.put(e.v["A"], "d", map[string]any{"v": 1})
				e.v["B"] = e.db("b", nil, []string{e.b.name})
				e.put(e.v["B"], "d", map[string]any{"v": 1})
			},
			attack: func(e *env) {
				g := strings.ReplaceAll("leaked_"+e.id, "-", "_")
				views(e, e.a, e.v["A"], "set", `function(doc){ `+g+` = "from A"; emit(doc._id, 1); }`)
				// the global object three ways; its names must not include A's
				for _, r := range views(e, e.b, e.v["B"], "get", `function(doc){
						var ways = [function(){ return emit.constructor('return this')(); }, function(){ return Function('return this')(); }, function(){ return eval('this'); }];
						for (var i = 0; i < ways.length; i++) { var names = []; try { var o = ways[i](); for (var k in o) names.push(k); names = names.concat(Object.getOwnPropertyNames(o)); } catch (e) { names = ['threw']; } emit(i, names.join(',')); }
					}`) {
					if strings.Contains(string(r.body), g) {
						e.t.Errorf("B's map sees A's global %s: %s", g, r)
					}
				}
			}},
	)
}
