// Package views builds and reads CouchDB views: the map/reduce indexes a
// design doc defines, one per design-doc signature per shard copy, kept in
// the node's badger under the copy's handle (so they go with the database
// and with the copy), built incrementally from the copy's by-seq index by
// an indexer that is not the shard actor (writes never wait for it), and
// read a page at a time in CouchDB's collation order. DESIGN.md in this
// directory says how.
package views

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/settee/settee/reduce"
)

// ErrInvalidDesign is a design doc CouchDB would refuse to store.
var ErrInvalidDesign = errors.New("invalid design doc")

// DesignError is a refused design doc: Code and Reason as CouchDB answers
// them (400).
type DesignError struct{ Code, Reason string }

func (e *DesignError) Error() string { return e.Code + ": " + e.Reason }
func (e *DesignError) Unwrap() error { return ErrInvalidDesign }

// View is one view of a design doc.
type View struct {
	Name   string
	Map    string
	Reduce string // "" when none; a builtin's name (_sum …) or JavaScript
}

// Def is a design doc's views: what its index is built from.
type Def struct {
	ID       string
	Language string
	Views    []View // by name
	Lib      map[string]any
	Options  map[string]any
	// Sig identifies the index: design docs whose views, language, options
	// and lib are the same share one (an edit that changes only other
	// members keeps it), as CouchDB's signature does.
	Sig [16]byte
	// partitionedOpt is options.partitioned when the doc sets it
	partitionedOpt *bool
}

// Partitioned reports whether the design doc's indexes are partitioned in
// a database that is partitioned (db) or not: in a partitioned database
// every design doc is, unless its options.partitioned is false; in
// another none is. A partitioned index keeps each partition's rows
// together (PartitionBounds) and is queried one partition at a time.
func (d *Def) Partitioned(db bool) bool {
	return db && (d.partitionedOpt == nil || *d.partitionedOpt)
}

// PartitionedOption is options.partitioned: set reports whether the doc
// has it.
func (d *Def) PartitionedOption() (value, set bool) {
	if d.partitionedOpt == nil {
		return false, false
	}
	return *d.partitionedOpt, true
}

// SigHex is the signature as _info shows it.
func (d *Def) SigHex() string { return hex.EncodeToString(d.Sig[:]) }

// View finds a view by name.
func (d *Def) View(name string) (int, bool) {
	i, ok := slices.BinarySearchFunc(d.Views, name, func(v View, n string) int { return strings.Compare(v.Name, n) })
	return i, ok
}

type ddocJSON struct {
	Language json.RawMessage            `json:"language"`
	Views    json.RawMessage            `json:"views"`
	Options  map[string]json.RawMessage `json:"options"`
}

// ParseDesign reads the views of a design doc. A doc without views has a
// Def with none (it defines no index). Errors are DesignErrors with
// CouchDB 3.5's answers for a design doc it refuses to store.
func ParseDesign(id string, body []byte) (*Def, error) {
	var raw ddocJSON
	if err := json.Unmarshal(body, &raw); err != nil {
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) != nil {
			return nil, &DesignError{"bad_request", "invalid design doc JSON"}
		}
		if o, ok := m["options"]; ok && !isObject(o) {
			return nil, &DesignError{"invalid_design_doc", "`options` field must have object type"}
		}
		return nil, &DesignError{"invalid_design_doc", "invalid design doc"}
	}
	d := &Def{ID: id, Language: "javascript"}
	if len(raw.Language) > 0 && string(raw.Language) != "null" {
		if err := json.Unmarshal(raw.Language, &d.Language); err != nil {
			return nil, &DesignError{"invalid_design_doc", "`language` field must have string type"}
		}
	}
	if v, ok := raw.Options["partitioned"]; ok {
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return nil, &DesignError{"invalid_design_doc", "`options.partitioned` field must have boolean type"}
		}
		d.partitionedOpt = &b
	}
	if len(raw.Views) == 0 || string(raw.Views) == "null" {
		return d, nil
	}
	if !isObject(raw.Views) {
		return nil, &DesignError{"invalid_design_doc", "`views` field must have object type"}
	}
	var views map[string]json.RawMessage
	if err := json.Unmarshal(raw.Views, &views); err != nil {
		return nil, &DesignError{"invalid_design_doc", "`views` field must have object type"}
	}
	// in name order, so that of several bad views the same one is named
	// each time (CouchDB walks its small maps in key order)
	names := make([]string, 0, len(views))
	for name := range views {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v := views[name]
		if name == "lib" {
			_ = json.Unmarshal(v, &d.Lib)
			continue
		}
		if !isObject(v) {
			return nil, &DesignError{"invalid_design_doc", fmt.Sprintf("`views.%s` field must have object type", name)}
		}
		var fns map[string]json.RawMessage
		_ = json.Unmarshal(v, &fns)
		vw := View{Name: name}
		m, ok := fns["map"]
		if !ok {
			return nil, &DesignError{"invalid_design_doc", fmt.Sprintf("View `%s` must contain map function", name)}
		}
		if d.Language == "query" {
			if !isObject(m) {
				return nil, &DesignError{"invalid_design_doc", fmt.Sprintf("`views.%s.map` field must have object type", name)}
			}
			vw.Map = string(m) // a Mango index's fields (the Mango issue builds it)
		} else if err := json.Unmarshal(m, &vw.Map); err != nil {
			return nil, &DesignError{"invalid_design_doc", fmt.Sprintf("`views.%s.map` field must have string type", name)}
		}
		if vw.Map == "" {
			return nil, &DesignError{"not_found", "missing function"}
		}
		if r, ok := fns["reduce"]; ok && string(r) != "null" {
			if err := json.Unmarshal(r, &vw.Reduce); err != nil {
				return nil, &DesignError{"invalid_design_doc", fmt.Sprintf("`views.%s.reduce` field must have string type", name)}
			}
			if vw.Reduce == "" {
				return nil, &DesignError{"not_found", "missing function"}
			}
			if t := strings.TrimSpace(vw.Reduce); strings.HasPrefix(t, "_") {
				if _, ok := reduce.Lookup(t); !ok {
					return nil, &DesignError{"invalid_design_doc", fmt.Sprintf("`%s` is not a supported reduce function.", t)}
				}
			}
		}
		d.Views = append(d.Views, vw)
	}
	slices.SortFunc(d.Views, func(a, b View) int { return strings.Compare(a.Name, b.Name) })
	if len(raw.Options) > 0 {
		d.Options = map[string]any{}
		for k, v := range raw.Options {
			var x any
			_ = json.Unmarshal(v, &x)
			d.Options[k] = x
		}
	}
	d.Sig = signature(d)
	return d, nil
}

func isObject(b json.RawMessage) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

// signature hashes what the index is made of, in a canonical form (Go's
// JSON encoding sorts map keys).
func signature(d *Def) [16]byte {
	b, _ := json.Marshal(struct {
		Language string         `json:"language"`
		Views    []View         `json:"views"`
		Lib      map[string]any `json:"lib"`
		Options  map[string]any `json:"options"`
	}{d.Language, d.Views, d.Lib, d.Options})
	sum := sha256.Sum256(b)
	var s [16]byte
	copy(s[:], sum[:])
	return s
}

// IncludeDesign reports options.include_design: map functions see design
// docs too.
func (d *Def) IncludeDesign() bool { v, _ := d.Options["include_design"].(bool); return v }

// LocalSeq reports options.local_seq: docs carry _local_seq.
func (d *Def) LocalSeq() bool { v, _ := d.Options["local_seq"].(bool); return v }

// DesignCache keeps parsed design docs by their bytes: every query of a
// design doc carries (or reads) the same body. The zero value is ready.
type DesignCache struct {
	mu sync.Mutex
	m  map[[32]byte]*Def
}

// Parse is ParseDesign, once per distinct id and body.
func (c *DesignCache) Parse(id string, body []byte) (*Def, error) {
	key := sha256.Sum256(append([]byte(id+"\x00"), body...))
	c.mu.Lock()
	d := c.m[key]
	c.mu.Unlock()
	if d != nil {
		return d, nil
	}
	d, err := ParseDesign(id, body)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= 1024 {
		c.m = map[[32]byte]*Def{}
	}
	c.m[key] = d
	c.mu.Unlock()
	return d, nil
}
