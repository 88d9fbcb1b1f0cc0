package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"dbURL":  func(db string) string { return Prefix + "/db/" + url.PathEscape(db) },
	"docURL": func(db, id string) string { return Prefix + "/doc/" + url.PathEscape(db) + "/" + url.PathEscape(id) },
	"bytes":  humanBytes,
}

func humanBytes(v any) string {
	var n float64
	switch x := v.(type) {
	case float64:
		n = x
	case int64:
		n = float64(x)
	case int:
		n = float64(x)
	default:
		return "—"
	}
	units := []string{"B", "KB", "MB", "GB", "TB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f %s", n, units[i])
	}
	return fmt.Sprintf("%.1f %s", n, units[i])
}

// page is what every template gets.
type page struct {
	Title    string
	User     string
	Roles    []string
	Node     string
	Version  string
	CSRF     string
	Problem  *problem
	Notice   string
	Data     any
	LoggedIn bool
}

func (c *Console) routes() {
	c.routesAdmin()
	c.mux.Handle("GET "+Prefix+"/static/", c.static)
	c.mux.HandleFunc("GET "+Prefix+"/{$}", c.databases)
	c.mux.HandleFunc("GET "+Prefix+"/login", c.loginPage)
	c.mux.HandleFunc("POST "+Prefix+"/login", c.login)
	// where the API sends a browser it refuses (Fauxton's login page,
	// httpgw's authentication_redirect default)
	c.mux.HandleFunc("GET "+Prefix+"/session.html", func(w http.ResponseWriter, r *http.Request) {
		q := url.Values{"next": {safeNext(r.URL.Query().Get("return"))}}
		http.Redirect(w, r, Prefix+"/login?"+q.Encode(), http.StatusSeeOther)
	})
	c.mux.HandleFunc("POST "+Prefix+"/logout", c.logout)
	c.mux.HandleFunc("POST "+Prefix+"/databases", c.createDB)
	c.mux.HandleFunc("GET "+Prefix+"/db/{db}", c.database)
	c.mux.HandleFunc("POST "+Prefix+"/db/{db}/delete", c.deleteDB)
	c.mux.HandleFunc("GET "+Prefix+"/db/{db}/find", c.find)
	c.mux.HandleFunc("GET "+Prefix+"/doc/{db}/{id}", c.docPage)
	c.mux.HandleFunc("POST "+Prefix+"/doc/{db}/{id}", c.saveDoc)
	c.mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", page{Title: "Not found",
			Problem: &problem{Message: "The console has no page at " + r.URL.Path + "."}})
	})
}

// render writes a page; an error in a template is logged and answered 500.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	p.Node, p.Version = c.cfg.NodeName, c.cfg.Version
	if p.CSRF == "" {
		p.CSRF = c.ensureToken(w, r)
	}
	var b strings.Builder
	if err := c.tmpl.ExecuteTemplate(&b, name, p); err != nil {
		c.log.Error("console template", "page", name, "err", err)
		http.Error(w, "console template error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}

// session is who the API says the browser is (GET /_session); nil and
// false when nobody is logged in.
type session struct {
	Name  string
	Roles []string
}

func (c *Console) session(r *http.Request) (*session, answer) {
	a := c.call(nil, r, http.MethodGet, "/_session", nil)
	if !a.ok() {
		return nil, a
	}
	var s struct {
		UserCtx struct {
			Name  *string  `json:"name"`
			Roles []string `json:"roles"`
		} `json:"userCtx"`
	}
	if a.decode(&s) != nil || s.UserCtx.Name == nil {
		return nil, a
	}
	return &session{Name: *s.UserCtx.Name, Roles: s.UserCtx.Roles}, a
}

// user is the logged-in user, or a redirect to the login page (with why:
// an expired session comes back as nobody).
func (c *Console) user(w http.ResponseWriter, r *http.Request) (*session, bool) {
	s, _ := c.session(r)
	if s != nil {
		return s, true
	}
	q := url.Values{"next": {r.URL.RequestURI()}}
	if ck, err := r.Cookie("AuthSession"); err == nil && ck.Value != "" {
		q.Set("expired", "1")
	}
	http.Redirect(w, r, Prefix+"/login?"+q.Encode(), http.StatusSeeOther)
	return nil, false
}

func (s *session) page(title string) page {
	return page{Title: title, User: s.Name, Roles: s.Roles, LoggedIn: true}
}

// safeNext keeps a login's redirect inside the console (an API path the
// browser was sent away from goes to the console's home).
func safeNext(n string) string {
	if strings.HasPrefix(n, Prefix+"/") && !strings.HasPrefix(n, "//") && !strings.Contains(n, "\\") {
		return n
	}
	return Prefix + "/"
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	p := page{Title: "Log in", Data: map[string]string{"Next": safeNext(r.URL.Query().Get("next"))}}
	if r.URL.Query().Get("expired") == "1" {
		p.Notice = "Your session has ended. Log in again."
	}
	c.render(w, r, http.StatusOK, "login", p)
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if why := c.checkCSRF(r); why != "" {
		c.forbidden(w, r, why)
		return
	}
	name, pw := r.PostFormValue("name"), r.PostFormValue("password")
	next := safeNext(r.PostFormValue("next"))
	a := c.call(w, r, http.MethodPost, "/_session", url.Values{"name": {name}, "password": {pw}})
	if !a.ok() {
		c.render(w, r, http.StatusUnauthorized, "login", page{Title: "Log in",
			Problem: problemOf("Log in failed.", a), Data: map[string]string{"Next": next, "Name": name}})
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if why := c.checkCSRF(r); why != "" {
		c.forbidden(w, r, why)
		return
	}
	c.call(w, r, http.MethodDelete, "/_session", nil)
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// changer is the logged-in user of a form that changes something, once
// its CSRF check passed; false when the answer (the login, or the
// refusal) has been written.
func (c *Console) changer(w http.ResponseWriter, r *http.Request) (*session, bool) {
	s, ok := c.user(w, r)
	if !ok {
		return nil, false
	}
	if why := c.checkCSRF(r); why != "" {
		c.forbidden(w, r, why)
		return nil, false
	}
	return s, true
}

// forbidden is a refused form: nothing was done.
func (c *Console) forbidden(w http.ResponseWriter, r *http.Request, why string) {
	c.render(w, r, http.StatusForbidden, "error", page{Title: "Refused",
		Problem: &problem{Message: "Refused, nothing was changed: " + why + "."}})
}

type dbRow struct {
	Name     string
	DocCount any
	Deleted  any
	Active   any
	File     any
	Q, N     any
}

func (c *Console) databases(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	c.renderDatabases(w, r, s, http.StatusOK, nil, "")
}

func (c *Console) renderDatabases(w http.ResponseWriter, r *http.Request, s *session, status int, prob *problem, notice string) {
	p := s.page("Databases")
	p.Problem, p.Notice = prob, notice
	a := c.call(w, r, http.MethodGet, "/_all_dbs", nil)
	if !a.ok() {
		if p.Problem == nil {
			p.Problem = problemOf("The databases could not be listed.", a)
		}
		c.render(w, r, a.Status, "databases", p)
		return
	}
	var names []string
	_ = a.decode(&names)
	var rows []dbRow
	for _, n := range names {
		row := dbRow{Name: n}
		info := c.call(nil, r, http.MethodGet, dbPath(n), nil)
		var m struct {
			DocCount    any `json:"doc_count"`
			DocDelCount any `json:"doc_del_count"`
			Sizes       struct {
				Active any `json:"active"`
				File   any `json:"file"`
			} `json:"sizes"`
			Cluster struct {
				Q any `json:"q"`
				N any `json:"n"`
			} `json:"cluster"`
		}
		if info.ok() && info.decode(&m) == nil {
			row.DocCount, row.Deleted, row.Active, row.File = m.DocCount, m.DocDelCount, m.Sizes.Active, m.Sizes.File
			row.Q, row.N = m.Cluster.Q, m.Cluster.N
		}
		rows = append(rows, row)
	}
	p.Data = rows
	c.render(w, r, status, "databases", p)
}

func (c *Console) createDB(w http.ResponseWriter, r *http.Request) {
	s, ok := c.changer(w, r)
	if !ok {
		return
	}
	name := r.PostFormValue("name")
	a := c.call(w, r, http.MethodPut, dbPath(name), nil)
	if !a.ok() {
		c.renderDatabases(w, r, s, a.Status, problemOf("The database "+strconv.Quote(name)+" was not created.", a), "")
		return
	}
	http.Redirect(w, r, Prefix+"/db/"+url.PathEscape(name), http.StatusSeeOther)
}

func (c *Console) deleteDB(w http.ResponseWriter, r *http.Request) {
	s, ok := c.changer(w, r)
	if !ok {
		return
	}
	db := r.PathValue("db")
	// the name typed again is the confirmation
	if r.PostFormValue("confirm") != db {
		c.renderDatabases(w, r, s, http.StatusBadRequest, &problem{Message: "Not deleted: type the database's name to confirm."}, "")
		return
	}
	a := c.call(w, r, http.MethodDelete, dbPath(db), nil)
	if !a.ok() {
		c.renderDatabases(w, r, s, a.Status, problemOf("The database "+strconv.Quote(db)+" was not deleted.", a), "")
		return
	}
	c.renderDatabases(w, r, s, http.StatusOK, nil, "Deleted "+db+".")
}

// docsPerPage is how many ids a database page lists.
const docsPerPage = 25

type docsPage struct {
	DB       string
	Rows     []docRow
	Total    any
	Next     string
	Prev     string
	HasPrev  bool
	HasNext  bool
	StartKey string
}

type docRow struct{ ID, Rev string }

func (c *Console) database(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	db := r.PathValue("db")
	p := s.page(db)
	start := r.URL.Query().Get("start")
	q := url.Values{"limit": {strconv.Itoa(docsPerPage + 1)}}
	if start != "" {
		k, _ := json.Marshal(start)
		q.Set("startkey", string(k))
	}
	a := c.call(w, r, http.MethodGet, dbPath(db)+"/_all_docs?"+q.Encode(), nil)
	dp := docsPage{DB: db, HasPrev: start != ""}
	if !a.ok() {
		p.Problem = problemOf("The documents of "+strconv.Quote(db)+" could not be listed.", a)
		p.Data = dp
		c.render(w, r, a.Status, "database", p)
		return
	}
	var res struct {
		TotalRows any `json:"total_rows"`
		Rows      []struct {
			ID    string `json:"id"`
			Value struct {
				Rev string `json:"rev"`
			} `json:"value"`
		} `json:"rows"`
	}
	_ = a.decode(&res)
	dp.Total = res.TotalRows
	for i, row := range res.Rows {
		if i == docsPerPage {
			dp.HasNext, dp.Next = true, row.ID
			break
		}
		dp.Rows = append(dp.Rows, docRow{ID: row.ID, Rev: row.Value.Rev})
	}
	p.Data = dp
	c.render(w, r, http.StatusOK, "database", p)
}

type docView struct {
	DB, ID    string
	New       bool
	Rev       string
	JSON      string
	Revs      []revInfo
	Conflicts []string
	Atts      []attInfo
}

type revInfo struct{ Rev, Status string }

type attInfo struct {
	Name, Type, URL string
	Length          any
}

// docPage shows a doc (id "_new": an empty one to create).
func (c *Console) docPage(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	db, id := r.PathValue("db"), r.PathValue("id")
	v, a := c.loadDoc(w, r, db, id)
	p := s.page(id)
	p.Data = v
	if a != nil {
		p.Problem = problemOf("The document "+strconv.Quote(id)+" could not be read.", *a)
		c.render(w, r, a.Status, "doc", p)
		return
	}
	c.render(w, r, http.StatusOK, "doc", p)
}

func (c *Console) loadDoc(w http.ResponseWriter, r *http.Request, db, id string) (*docView, *answer) {
	v := &docView{DB: db, ID: id}
	if id == "_new" {
		v.New, v.ID, v.JSON = true, "", "{\n  \"_id\": \"\"\n}"
		return v, nil
	}
	a := c.call(w, r, http.MethodGet, docPath(db, id)+"?revs_info=true&conflicts=true", nil)
	if !a.ok() {
		return v, &a
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(a.Body))
	dec.UseNumber() // numbers shown as stored, not through float64
	if err := dec.Decode(&m); err != nil {
		return v, &a
	}
	v.Rev, _ = m["_rev"].(string)
	if ri, ok := m["_revs_info"].([]any); ok {
		for _, x := range ri {
			if e, ok := x.(map[string]any); ok {
				v.Revs = append(v.Revs, revInfo{Rev: str(e["rev"]), Status: str(e["status"])})
			}
		}
	}
	if cs, ok := m["_conflicts"].([]any); ok {
		for _, x := range cs {
			v.Conflicts = append(v.Conflicts, str(x))
		}
	}
	if at, ok := m["_attachments"].(map[string]any); ok {
		for name, x := range at {
			e, _ := x.(map[string]any)
			v.Atts = append(v.Atts, attInfo{Name: name, Type: str(e["content_type"]), Length: e["length"],
				URL: docPath(db, id) + "/" + url.PathEscape(name)})
		}
	}
	delete(m, "_revs_info")
	delete(m, "_conflicts")
	b, _ := json.MarshalIndent(m, "", "  ")
	v.JSON = string(b)
	return v, nil
}

// saveDoc writes the edited JSON. A parse error or a refusal (a stale
// rev's 409 among them) shows the page again with the user's text kept.
func (c *Console) saveDoc(w http.ResponseWriter, r *http.Request) {
	s, ok := c.changer(w, r)
	if !ok {
		return
	}
	db, id := r.PathValue("db"), r.PathValue("id")
	text := r.PostFormValue("json")
	again := func(status int, prob *problem) {
		v, _ := c.loadDoc(w, r, db, id)
		v.JSON = text
		p := s.page(id)
		p.Problem, p.Data = prob, v
		c.render(w, r, status, "doc", p)
	}
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || dec.More() {
		msg := "not a JSON object"
		if err != nil {
			msg = err.Error()
		}
		again(http.StatusBadRequest, &problem{Message: "Not saved: the text is not a JSON object (" + msg + "); nothing was sent."})
		return
	}
	target := id
	if id == "_new" {
		target, _ = doc["_id"].(string)
	}
	body, _ := json.Marshal(doc)
	var a answer
	if target == "" {
		a = c.call(w, r, http.MethodPost, dbPath(db), body)
	} else {
		a = c.call(w, r, http.MethodPut, docPath(db, target), body)
	}
	if !a.ok() {
		msg := "Not saved."
		if a.Status == http.StatusConflict {
			msg = "Not saved: the document changed since you opened it (your text is kept below; reload to see the new revision)."
		}
		again(a.Status, problemOf(msg, a))
		return
	}
	var res struct {
		ID string `json:"id"`
	}
	_ = a.decode(&res)
	http.Redirect(w, r, Prefix+"/doc/"+url.PathEscape(db)+"/"+url.PathEscape(res.ID)+"?saved=1", http.StatusSeeOther)
}

type findPage struct {
	DB      string
	Query   string
	Ran     bool
	Docs    []string
	Warning string
	Plan    string
	Index   string
}

// defaultQuery is the find box's text before the user types one.
const defaultQuery = "{\n  \"selector\": {},\n  \"limit\": 25\n}"

// find is the Mango box: the query is sent to _explain and _find (a read:
// a GET form, no token needed), the docs and the plan shown.
func (c *Console) find(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	db := r.PathValue("db")
	p := s.page("Find in " + db)
	fp := findPage{DB: db, Query: r.URL.Query().Get("q")}
	p.Data = &fp
	if fp.Query == "" {
		fp.Query = defaultQuery
		c.render(w, r, http.StatusOK, "find", p)
		return
	}
	var q map[string]any
	if err := json.Unmarshal([]byte(fp.Query), &q); err != nil {
		p.Problem = &problem{Message: "Not run: the query is not a JSON object (" + err.Error() + ")."}
		c.render(w, r, http.StatusBadRequest, "find", p)
		return
	}
	body := []byte(fp.Query)
	ex := c.call(w, r, http.MethodPost, dbPath(db)+"/_explain", body)
	if !ex.ok() {
		p.Problem = problemOf("The query was refused.", ex)
		c.render(w, r, ex.Status, "find", p)
		return
	}
	var plan struct {
		Index struct {
			DDoc any    `json:"ddoc"`
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"index"`
	}
	_ = ex.decode(&plan)
	fp.Index = plan.Index.Type + " index " + plan.Index.Name
	if d, ok := plan.Index.DDoc.(string); ok {
		fp.Index += " (" + d + ")"
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, ex.Body, "", "  ") == nil {
		fp.Plan = pretty.String()
	}
	a := c.call(w, r, http.MethodPost, dbPath(db)+"/_find", body)
	if !a.ok() {
		p.Problem = problemOf("The query was refused.", a)
		c.render(w, r, a.Status, "find", p)
		return
	}
	var res struct {
		Docs    []json.RawMessage `json:"docs"`
		Warning string            `json:"warning"`
	}
	_ = a.decode(&res)
	fp.Ran, fp.Warning = true, res.Warning
	for _, d := range res.Docs {
		var b bytes.Buffer
		if json.Indent(&b, d, "", "  ") == nil {
			fp.Docs = append(fp.Docs, b.String())
		}
	}
	c.render(w, r, http.StatusOK, "find", p)
}
