package couchjs

import (
	"crypto/sha256"
	_ "embed"
	"strconv"
	"strings"
)

//go:embed lockdown.js
var lockdownSrc string

// DDoc is a sandbox: the runtimes that run one design doc's functions,
// with the doc as their `this` and its CommonJS modules for require(), as
// CouchDB runs them. Calls through DDoc values of the same sandbox share
// built-ins and globals (what a function leaves in them persists between
// calls, as in a couchjs process); calls of different sandboxes never
// do: a runtime is created for one sandbox and serves no other.
type DDoc struct {
	p   *Pool
	key string
	// class is what the Pool shares its workers by: the database, or ""
	// for the Pool's own one-off calls (see Config.MaxWorkersPerDB)
	class string
	ddoc  []byte
	// bound: the key determines ddoc (DDoc), so a runtime of the sandbox
	// keeps the parsed doc and its require between calls
	bound bool
	// once: a runtime of its own, dropped after the call
	once bool
}

// DDoc is the sandbox of a design doc (its JSON, with _id and _rev) of
// database db: the same bytes in the same database name the same sandbox,
// and a new revision a new one. The render, filter and validation calls
// and NewMapSet run there.
func (p *Pool) DDoc(db string, ddoc []byte) *DDoc {
	if p == nil {
		return nil
	}
	sum := sha256.Sum256(ddoc)
	return &DDoc{p: p, key: sandboxKey("ddoc", db, string(sum[:])), class: db, ddoc: ddoc, bound: ddoc != nil}
}

// Sandbox is the sandbox named by name (for instance a database, "views"
// and an index signature), with no design doc: functions see an empty
// `this` and no modules but those NewMapSet is given. Equal names are
// one sandbox; a name never equals a DDoc's. The first name is the
// database its calls are counted against (Config.MaxWorkersPerDB).
func (p *Pool) Sandbox(name ...string) *DDoc {
	if p == nil {
		return nil
	}
	d := &DDoc{p: p, key: sandboxKey(append([]string{"named"}, name...)...)}
	if len(name) > 0 {
		d.class = name[0]
	}
	return d
}

// oneOff is a sandbox for one call: a fresh runtime, dropped after. The
// Pool's methods of the DDoc names run there, so nothing leaks between
// them; they pay for a runtime per call (about 0.3 ms). They share the
// workers as one class of their own.
func (p *Pool) oneOff() *DDoc { return &DDoc{p: p, once: true} }

// sandboxKey joins parts without ambiguity.
func sandboxKey(parts ...string) string {
	var b strings.Builder
	for _, s := range parts {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}
