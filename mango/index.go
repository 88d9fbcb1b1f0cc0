package mango

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"
	"strings"
)

// IndexRequest is a POST /db/_index body, validated as mango_opts'
// validate_idx_create and mango_idx_view's validate_new do it.
type IndexRequest struct {
	// Def is the "index" member as sent; CouchDB keeps it as the view's
	// options.def, and hashes it for the default names.
	Def Object
	// Fields are index.fields, in order, as CouchDB stores them: the
	// view's map keeps them as an object, so a field named twice keeps
	// its last place (["a","b","a"] is b, a); PartialFilter the normalized
	// index.partial_filter_selector (an empty Object when none, which is
	// what CouchDB stores).
	Fields        []SortField
	PartialFilter any
	Type          string // "json"
	// DDoc is the design doc's id ("_design/…"), Name the view's name:
	// as given, or derived as CouchDB derives them (see genName).
	DDoc, Name string
	W          int64 // "w", default 2
	// Partitioned is "partitioned", nil when not given (the database's
	// default then applies).
	Partitioned *bool
}

// idxCreateOpts are validate_idx_create's options in its order.
var idxCreateOpts = []string{"index", "type", "name", "ddoc", "w", "partitioned"}

// ParseIndexRequest reads a POST /db/_index body. Errors are
// *RequestError as CouchDB 3.5.2 answers. A partial_filter_selector is
// taken inside "index" only: CouchDB refuses one beside it (invalid_key).
// Types "text" and "nouveau" are refused as CouchDB without those
// services refuses them (503); any other is invalid_index.
func ParseIndexRequest(body []byte) (*IndexRequest, error) {
	obj, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	r := &IndexRequest{Type: "json", W: 2}
	// the options as validate_idx_create returns them, for the names
	nameOpt, ddocOpt, partOpt := any(atom("auto_name")), any(atom("auto_name")), any(atom("db_default"))
	var def any
	wOpt := any(json.Number("2"))
	for _, name := range idxCreateOpts {
		v, ok := obj.Get(name)
		if !ok {
			if name == "index" {
				return nil, badRequest("missing_required_key", "Missing required key: index")
			}
			continue
		}
		switch name {
		case "index":
			def = v
		case "type", "name", "ddoc":
			s, ok := v.(string)
			if !ok {
				return nil, badRequest("invalid_string", "Invalid string: %s", erlW(v))
			}
			switch name {
			case "type":
				r.Type = s
			case "name":
				nameOpt, r.Name = s, s
			case "ddoc":
				ddocOpt, r.DDoc = s, s
			}
		case "w":
			n, ok := isInt(v)
			if !ok || n.Sign() <= 0 {
				return nil, badRequest("invalid_pos_integer", "%s is not an integer greater than zero", erlW(v))
			}
			wOpt, r.W = v, clamp(n)
		case "partitioned":
			b, ok := v.(bool)
			if !ok {
				return nil, unknownError("mango_opts", "{invalid_partitioned_value,"+erlW(v)+"}")
			}
			partOpt, r.Partitioned = b, &b
		}
	}
	if err := unknownKey(obj, idxCreateOpts); err != nil {
		return nil, err
	}
	if _, given := nameOpt.(string); given && r.Name == "" {
		return nil, badRequest("invalid_empty_string", "Index name or ddoc cannot be empty string")
	}
	if _, given := ddocOpt.(string); given && r.DDoc == "" {
		return nil, badRequest("invalid_empty_string", "Index name or ddoc cannot be empty string")
	}
	switch r.Type {
	case "json":
	case "text", "nouveau":
		return nil, reqErr(503, "required index service unavailable", "%s", r.Type)
	default:
		return nil, badRequest("invalid_index", "Invalid type for index: %s", r.Type)
	}
	opts := []any{ // lists:usort order: ddoc, def, name, partitioned, type, w
		tuple{atom("ddoc"), ddocOpt}, tuple{atom("def"), def}, tuple{atom("name"), nameOpt},
		tuple{atom("partitioned"), partOpt}, tuple{atom("type"), r.Type}, tuple{atom("w"), wOpt},
	}
	hash := genName(def, opts)
	if r.Name == "" {
		r.Name = hash
	}
	switch {
	case r.DDoc == "":
		r.DDoc = "_design/" + hash
	case !strings.HasPrefix(r.DDoc, "_design/"):
		r.DDoc = "_design/" + r.DDoc
	}
	d, ok := def.(Object)
	if !ok {
		return nil, badRequest("invalid_index", "JSON indexes must be an object, not: %s", erlW(def))
	}
	r.Def = d
	fv, ok := d.Get("fields")
	if !ok {
		return nil, badRequest("missing_required_key", "Missing required key: fields")
	}
	if r.Fields, err = parseSort(fv); err != nil {
		return nil, err
	}
	r.Fields = dedupeFields(r.Fields)
	r.PartialFilter = Object{}
	if pf, ok := d.Get("partial_filter_selector"); ok {
		if !isObject(pf) {
			return nil, badRequest("invalid_selector_json", "Selector must be a JSON object, not: %s", erlW(pf))
		}
		if r.PartialFilter, err = Normalize(pf); err != nil {
			return nil, err
		}
	}
	if err := unknownKey(d, []string{"fields", "partial_filter_selector"}); err != nil {
		return nil, err
	}
	return r, nil
}

// dedupeFields keeps the last of the fields of one name, at its place.
func dedupeFields(fs []SortField) []SortField {
	last := map[string]int{}
	for i, f := range fs {
		last[f.Name] = i
	}
	out := []SortField{}
	for i, f := range fs {
		if last[f.Name] == i {
			out = append(out, f)
		}
	}
	return out
}

// genName is mango_idx:gen_name: the hex SHA-1 of
// term_to_binary({Def, lists:usort(Opts)}), Def being the "index" member
// as jiffy decoded it and Opts validate_idx_create's result (def, type,
// name, ddoc, w, partitioned, with auto_name, 2 and db_default for those
// not given). So a name given changes the default ddoc id, and so does
// "w". Checked against CouchDB 3.5.2 (TestIndexNames).
func genName(def any, opts []any) string {
	sum := sha1.Sum(termToBinary(tuple{def, opts}))
	return hex.EncodeToString(sum[:])
}

// mapDef is the view's "map" object CouchDB writes for the index:
// {"fields":{"a":"asc",…},"partial_filter_selector":{…}}.
func (r *IndexRequest) mapDef() Object {
	fields := make(Object, len(r.Fields))
	for i, f := range r.Fields {
		dir := "asc"
		if f.Desc {
			dir = "desc"
		}
		fields[i] = Member{f.Name, dir}
	}
	return Object{{"fields", fields}, {"partial_filter_selector", r.PartialFilter}}
}

// View is the view CouchDB adds to the design doc for the index (under
// views.<Name>): its map, reduce "_count" and options.def.
func (r *IndexRequest) View() Object {
	return Object{{"map", r.mapDef()}, {"reduce", "_count"}, {"options", Object{{"def", r.Def}}}}
}

// DesignDoc is the design doc CouchDB writes for the index when the
// design doc does not exist yet: language "query", the one view, and
// options.partitioned when the request says. (To an existing design doc
// CouchDB adds View under views.<Name>, replacing a view of that name.)
func (r *IndexRequest) DesignDoc() []byte {
	d := Object{{"_id", r.DDoc}, {"language", "query"}, {"views", Object{{r.Name, r.View()}}}}
	if r.Partitioned != nil {
		d = append(d, Member{"options", Object{{"partitioned", *r.Partitioned}}})
	}
	b, _ := json.Marshal(d)
	return b
}

// Index is the index the request creates, as ParseIndexView reads it
// back from the design doc CouchDB writes; dbPartitioned is the
// database's default, which applies when the request has no
// "partitioned".
func (r *IndexRequest) Index(dbPartitioned bool) *Index {
	b, _ := json.Marshal(r.mapDef())
	opts := map[string]any{"partitioned": dbPartitioned}
	if r.Partitioned != nil {
		opts["partitioned"] = *r.Partitioned
	}
	ix, err := ParseIndexView(r.DDoc, r.Name, b, opts)
	if err != nil {
		// the request's own map always reads back
		panic("mango: " + err.Error())
	}
	return ix
}

// Index is a Mango index as read back from its design doc.
type Index struct {
	DDoc, Name string
	Type       string // "json", or "special" for _all_docs
	Fields     []SortField
	// PartialFilter is the normalized partial_filter_selector, nil when
	// none.
	PartialFilter any
	Partitioned   bool

	def     Object    // the view's map, for JSON
	partial *Selector // PartialFilter compiled; nil when none
	// partialErr: the filter does not compile with this package's
	// matcher (e.g. a $regex only PCRE has); such an index indexes
	// nothing.
	partialErr error
}

// AllDocsIndex is the special _all_docs index every database lists.
func AllDocsIndex() *Index {
	return &Index{Name: "_all_docs", Type: "special", Fields: []SortField{{Name: "_id"}}}
}

// ParseIndexView reads a query-language design doc's view back into an
// Index, as mango_idx_view:from_ddoc does: mapJSON is the view's "map"
// object (views.View.Map), options the design doc's "options"
// (views.Def.Options), whose "partitioned" says whether the index is
// partitioned. When options has no "partitioned", Partitioned is false
// and the caller sets it to the database's default: CouchDB writes no
// options.partitioned for an index created without "partitioned", and
// lists it as partitioned on a partitioned database (recorded in
// testdata/couchdb_partitioned.json).
// A view CouchDB would skip as invalid is an error.
func ParseIndexView(ddocID, viewName string, mapJSON []byte, options map[string]any) (*Index, error) {
	v, err := decodeJSON(mapJSON)
	if err != nil {
		return nil, errors.New("mango: index view map is not JSON")
	}
	def, ok := v.(Object)
	if !ok {
		return nil, errors.New("mango: index view map is not an object")
	}
	ix := &Index{DDoc: ddocID, Name: viewName, Type: "json", Fields: []SortField{}, def: def}
	fv, ok := def.Get("fields")
	fo, isObj := fv.(Object)
	if !ok || !isObj {
		return nil, errors.New("mango: index view map has no fields object")
	}
	for _, m := range fo {
		// CouchDB takes any direction here (it lists {"e":"up"} as it is)
		ix.Fields = append(ix.Fields, SortField{Name: m.Key, Desc: m.Value == "desc"})
	}
	pf, ok := def.Get("partial_filter_selector")
	if !ok || isEmptyObject(pf) {
		// mango_idx's legacy form: a text index's "selector"
		pf, ok = def.Get("selector")
	}
	if ok && !isEmptyObject(pf) {
		if !isObject(pf) {
			return nil, errors.New("mango: index view partial_filter_selector is not an object")
		}
		n, err := Normalize(pf)
		if err != nil {
			return nil, err
		}
		ix.PartialFilter = n
		ix.partial, ix.partialErr = Compile(plain(n))
	}
	if p, ok := options["partitioned"].(bool); ok {
		ix.Partitioned = p
	}
	return ix, nil
}

// ParseIndexDesign is mango_idx:from_ddoc: the json indexes of a design
// doc (its stored JSON), in view name order, as GET /db/_index lists
// them. A design doc of another language than "query" has none; a view
// CouchDB cannot read as an index (no "options" object, a map without a
// "fields" object) is left out, as CouchDB leaves it out. An index is
// partitioned as the doc's options.partitioned says, else as the
// database (dbPartitioned).
func ParseIndexDesign(ddoc []byte, dbPartitioned bool) ([]*Index, error) {
	v, err := decodeJSON(ddoc)
	if err != nil {
		return nil, errors.New("mango: design doc is not JSON")
	}
	d, ok := v.(Object)
	if !ok {
		return nil, errors.New("mango: design doc is not an object")
	}
	if lang, _ := d.Get("language"); lang != "query" {
		return nil, nil
	}
	id, _ := d.Get("_id")
	ddocID, _ := id.(string)
	opts := map[string]any{}
	if o, ok := d.Get("options"); ok {
		if oo, ok := o.(Object); ok {
			opts, _ = plain(oo).(map[string]any)
		}
	}
	if _, set := opts["partitioned"].(bool); !set {
		opts["partitioned"] = dbPartitioned
	}
	views, _ := d.Get("views")
	vo, _ := views.(Object)
	names := make([]string, 0, len(vo))
	byName := map[string]Object{}
	for _, m := range vo {
		view, ok := m.Value.(Object)
		if !ok {
			continue
		}
		if vopts, ok := view.Get("options"); !ok || !isObject(vopts) {
			continue // validate_ddoc: {Opts0} = options fails
		}
		if _, seen := byName[m.Key]; !seen {
			names = append(names, m.Key)
		}
		byName[m.Key] = view
	}
	sort.Strings(names)
	var out []*Index
	for _, name := range names {
		mp, _ := byName[name].Get("map")
		b, _ := json.Marshal(mp)
		ix, err := ParseIndexView(ddocID, name, b, opts)
		if err != nil {
			continue
		}
		out = append(out, ix)
	}
	return out, nil
}

func isEmptyObject(v any) bool {
	switch o := v.(type) {
	case Object:
		return len(o) == 0
	case map[string]any:
		return len(o) == 0
	}
	return false
}

// JSON is the index as GET /db/_index lists it:
// {"ddoc":…,"name":…,"type":"json","partitioned":…,"def":{"fields":[{"a":"asc"}],…}},
// the def being the view's map with its fields as a list and an empty
// partial_filter_selector left out (mango_idx_view:def_to_json); the
// _all_docs index is {"ddoc":null,"name":"_all_docs","type":"special",
// "def":{"fields":[{"_id":"asc"}]}}.
func (ix *Index) JSON() []byte {
	if ix.Type == "special" {
		return []byte(`{"ddoc":null,"name":"_all_docs","type":"special","def":{"fields":[{"_id":"asc"}]}}`)
	}
	def := Object{}
	for _, m := range ix.def {
		switch {
		case m.Key == "fields":
			// mango_sort:to_json: each field as {name: direction}, the
			// direction as stored
			fo, _ := m.Value.(Object)
			l := make([]any, len(fo))
			for i, f := range fo {
				l[i] = Object{f}
			}
			def = append(def, Member{"fields", l})
		case m.Key == "partial_filter_selector" && isEmptyObject(m.Value):
		default:
			def = append(def, m)
		}
	}
	b, _ := json.Marshal(Object{{"ddoc", ix.DDoc}, {"name", ix.Name}, {"type", ix.Type},
		{"partitioned", ix.Partitioned}, {"def", def}})
	return b
}

// Keys is what a json index emits for doc (mango_native_proc's
// get_index_entries): the values of the index's fields in order, as the
// row's key; the row's value is null. A doc is not indexed (ok false)
// when it is a design doc, when it does not match the partial filter,
// or when any of the fields is missing (a path through a non-object, or
// past an array's end, is missing too; a numeric part indexes an array).
func (ix *Index) Keys(doc any) (key []any, ok bool) {
	if id, _ := getField(doc, []string{"_id"}); id != nil {
		if s, _ := id.(string); strings.HasPrefix(s, "_design/") {
			return nil, false
		}
	}
	if ix.partialErr != nil {
		return nil, false
	}
	if ix.partial != nil && !ix.partial.Match(plain(doc)) {
		return nil, false
	}
	key = make([]any, len(ix.Fields))
	for i, f := range ix.Fields {
		v, found := getField(doc, splitField(f.Name))
		if !found {
			return nil, false
		}
		key[i] = v
	}
	return key, true
}

// AddTo is mango_idx:add on the design doc the index goes to: ddoc is
// that doc as stored (nil when there is none, or it is deleted), the
// result the doc to write, and exists says the index is there already,
// as it is (CouchDB then answers {"result":"exists"} and writes nothing).
// The view goes under views.<Name>, replacing one of that name where it
// was, else last; the doc's other members stay as they are. Errors as
// CouchDB's: a design doc of another language than "query" is
// invalid_ddoc_lang, and an existing design doc whose options.partitioned
// is not the request's "partitioned" (absent counting as neither true nor
// false: {"partitioned":false} on the doc refuses a request without one)
// is invalid_partitioned_option.
func (r *IndexRequest) AddTo(ddoc []byte) (doc []byte, exists bool, err error) {
	if len(ddoc) == 0 {
		return r.DesignDoc(), false, nil
	}
	v, err := decodeJSON(ddoc)
	if err != nil {
		return nil, false, errors.New("mango: design doc is not JSON")
	}
	d, ok := v.(Object)
	if !ok {
		return nil, false, errors.New("mango: design doc is not an object")
	}
	if lang, ok := d.Get("language"); !ok || lang != "query" {
		term := "false" // lists:keyfind's answer when there is none
		if ok {
			term = "{" + erlW("language") + "," + erlW(lang) + "}"
		}
		return nil, false, badRequest("invalid_ddoc_lang", "Existing design doc has an invalid language: %s", term)
	}
	var old any = atom("undefined")
	if o, ok := d.Get("options"); ok {
		if oo, ok := o.(Object); ok {
			if p, ok := oo.Get("partitioned"); ok {
				old = p
			}
		}
	}
	var want any = atom("undefined")
	if r.Partitioned != nil {
		want = *r.Partitioned
	}
	if old != want {
		return nil, false, badRequest("invalid_partitioned_option",
			"Requested partitioned option does not match existing value on design document %s", r.DDoc)
	}
	views, _ := d.Get("views")
	vo, _ := views.(Object)
	view := r.View()
	nv := make(Object, 0, len(vo)+1)
	replaced := false
	for _, m := range vo {
		if m.Key == r.Name && !replaced {
			exists = string(marshalValue(m.Value)) == string(marshalValue(view))
			nv = append(nv, Member{r.Name, view})
			replaced = true
			continue
		}
		nv = append(nv, m)
	}
	if !replaced {
		nv = append(nv, Member{r.Name, view})
	}
	out := make(Object, 0, len(d)+1)
	set := false
	for _, m := range d {
		if m.Key == "views" {
			out = append(out, Member{"views", nv})
			set = true
			continue
		}
		out = append(out, m)
	}
	if !set {
		out = append(out, Member{"views", nv})
	}
	b, _ := json.Marshal(out)
	return b, exists, nil
}

// marshalValue writes v as MarshalJSON writes it, to compare two values.
func marshalValue(v any) []byte {
	var b bytes.Buffer
	_ = writeJSON(&b, v)
	return b.Bytes()
}
