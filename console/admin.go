package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// The pages of design docs and views, active tasks, replication, the
// cluster, the node's config and the graphs. The admin ones show the
// API's 401 to a user who is not a server admin.

func (c *Console) routesAdmin() {
	m := c.mux
	m.HandleFunc("GET "+Prefix+"/db/{db}/design", c.design)
	m.HandleFunc("GET "+Prefix+"/db/{db}/view", c.viewQuery)
	m.HandleFunc("GET "+Prefix+"/tasks", c.tasks)
	m.HandleFunc("GET "+Prefix+"/replication", c.replication)
	m.HandleFunc("POST "+Prefix+"/replication", c.createReplication)
	m.HandleFunc("POST "+Prefix+"/replication/cancel", c.cancelReplication)
	m.HandleFunc("GET "+Prefix+"/cluster", c.cluster)
	m.HandleFunc("GET "+Prefix+"/config", c.config)
	m.HandleFunc("POST "+Prefix+"/config", c.setConfig)
	m.HandleFunc("GET "+Prefix+"/graphs", c.graphs)
}

// --- design docs and views ---------------------------------------------

type ddocRow struct {
	ID, Name, Language string
	Views              []viewRow
}

type viewRow struct {
	Name   string
	Reduce bool
}

type designPage struct {
	DB    string
	DDocs []ddocRow
}

func (c *Console) design(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	db := r.PathValue("db")
	p := s.page("Design documents of " + db)
	d := designPage{DB: db}
	p.Data = d
	a := c.call(w, r, http.MethodGet, dbPath(db)+"/_design_docs?include_docs=true", nil)
	if !a.ok() {
		p.Problem = problemOf("The design documents could not be listed.", a)
		c.render(w, r, a.Status, "design", p)
		return
	}
	var out struct {
		Rows []struct {
			ID  string `json:"id"`
			Doc struct {
				Language string `json:"language"`
				Views    map[string]struct {
					Reduce any `json:"reduce"`
				} `json:"views"`
			} `json:"doc"`
		} `json:"rows"`
	}
	_ = a.decode(&out)
	for _, row := range out.Rows {
		dr := ddocRow{ID: row.ID, Name: strings.TrimPrefix(row.ID, "_design/"), Language: row.Doc.Language}
		if dr.Language == "" {
			dr.Language = "javascript"
		}
		for n, v := range row.Doc.Views {
			dr.Views = append(dr.Views, viewRow{Name: n, Reduce: v.Reduce != nil})
		}
		sort.Slice(dr.Views, func(i, j int) bool { return dr.Views[i].Name < dr.Views[j].Name })
		d.DDocs = append(d.DDocs, dr)
	}
	p.Data = d
	c.render(w, r, http.StatusOK, "design", p)
}

type viewPage struct {
	DB, DDoc, View               string
	Key, StartKey, EndKey, Limit string
	Reduce                       string
	Group, IncludeDocs, Ran      bool
	Reduces                      bool
	Rows                         []viewResult
	Total, Offset                string
	APIPath                      string
}

type viewResult struct{ ID, Key, Value, Doc string }

// viewQuery is a view's query form (a read: a GET form) and its rows.
func (c *Console) viewQuery(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	d := &viewPage{DB: r.PathValue("db"), DDoc: q.Get("ddoc"), View: q.Get("view"), Key: q.Get("key"),
		StartKey: q.Get("startkey"), EndKey: q.Get("endkey"), Limit: q.Get("limit"), Reduce: q.Get("reduce"),
		Group: q.Get("group") != "", IncludeDocs: q.Get("include_docs") != "", Ran: q.Get("run") != ""}
	if d.Limit == "" {
		d.Limit = "20"
	}
	p := s.page("View " + d.DDoc + "/" + d.View)
	p.Data = d
	if dd := c.call(w, r, http.MethodGet, docPath(d.DB, "_design/"+d.DDoc), nil); dd.ok() {
		var doc struct {
			Views map[string]struct {
				Reduce any `json:"reduce"`
			} `json:"views"`
		}
		if dd.decode(&doc) == nil {
			d.Reduces = doc.Views[d.View].Reduce != nil
		}
	}
	if !d.Ran {
		c.render(w, r, http.StatusOK, "view", p)
		return
	}
	aq := url.Values{}
	for k, v := range map[string]string{"key": d.Key, "startkey": d.StartKey, "endkey": d.EndKey, "limit": d.Limit} {
		if v = strings.TrimSpace(v); v != "" {
			aq.Set(k, v)
		}
	}
	if d.Reduce == "true" || d.Reduce == "false" {
		aq.Set("reduce", d.Reduce)
	}
	if d.Group {
		aq.Set("group", "true")
	}
	if d.IncludeDocs {
		aq.Set("include_docs", "true")
	}
	path := docPath(d.DB, "_design/"+d.DDoc) + "/_view/" + url.PathEscape(d.View)
	if len(aq) > 0 {
		path += "?" + aq.Encode()
	}
	d.APIPath = path
	a := c.call(w, r, http.MethodGet, path, nil)
	if !a.ok() {
		p.Problem = problemOf("The view query failed.", a)
		c.render(w, r, a.Status, "view", p)
		return
	}
	var out struct {
		Total  json.RawMessage `json:"total_rows"`
		Offset json.RawMessage `json:"offset"`
		Rows   []struct {
			ID    string          `json:"id"`
			Key   json.RawMessage `json:"key"`
			Value json.RawMessage `json:"value"`
			Doc   json.RawMessage `json:"doc"`
		} `json:"rows"`
	}
	_ = a.decode(&out)
	d.Total, d.Offset = string(out.Total), string(out.Offset)
	for _, row := range out.Rows {
		vr := viewResult{ID: row.ID, Key: string(row.Key), Value: string(row.Value)}
		if len(row.Doc) > 0 {
			vr.Doc = indent(row.Doc)
		}
		d.Rows = append(d.Rows, vr)
	}
	c.render(w, r, http.StatusOK, "view", p)
}

func indent(b []byte) string {
	var buf bytes.Buffer
	if json.Indent(&buf, b, "", "  ") != nil {
		return string(b)
	}
	return buf.String()
}

// --- active tasks -------------------------------------------------------

type taskRow struct {
	Type, What, Node, Detail string
	Progress                 int // -1: unknown
}

// taskRows turns _active_tasks into rows; console.js does the same with
// each poll.
func taskRows(body []byte) []taskRow {
	var ts []map[string]any
	_ = json.Unmarshal(body, &ts)
	var out []taskRow
	for _, t := range ts {
		r := taskRow{Type: str(t["type"]), Node: str(t["node"]), Progress: -1}
		switch r.Type {
		case "replication":
			r.What = str(t["source"]) + " → " + str(t["target"])
			read, _ := t["docs_read"].(float64)
			if pend, ok := t["changes_pending"].(float64); ok && read+pend > 0 {
				r.Progress = int(100 * read / (read + pend))
			}
			r.Detail = fmt.Sprintf("%v docs read, %v written, %v pending", t["docs_read"], t["docs_written"], orDash(t["changes_pending"]))
		case "indexer", "view_compaction":
			r.What = str(t["database"]) + " " + str(t["design_document"])
		default:
			r.What = str(t["database"])
		}
		if pr, ok := t["progress"].(float64); ok {
			r.Progress = int(pr)
		}
		if cd, ok := t["changes_done"]; ok && r.Detail == "" {
			r.Detail = fmt.Sprintf("%v of %v changes", cd, orDash(t["total_changes"]))
		}
		out = append(out, r)
	}
	return out
}

func orDash(v any) any {
	if v == nil {
		return "–"
	}
	return v
}

func (c *Console) tasks(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	p := s.page("Active tasks")
	a := c.call(w, r, http.MethodGet, "/_active_tasks", nil)
	if !a.ok() {
		p.Problem = problemOf("The active tasks could not be read (a server admin's page).", a)
		c.render(w, r, a.Status, "tasks", p)
		return
	}
	p.Data = taskRows(a.Body)
	c.render(w, r, http.StatusOK, "tasks", p)
}

// --- replication --------------------------------------------------------

type repDoc struct {
	DocID, Source, Target, State, Error, Written string
	Errors, Progress                             int
}

type repJob struct{ ID, DocID, Source, Target, Node, Last string }

type repPage struct {
	Docs                   []repDoc
	Jobs                   []repJob
	JobsProb               *problem
	ID, Source, Target     string
	Continuous, CreateTarg bool
}

func endpointName(v any) string {
	switch e := v.(type) {
	case string:
		return redactURL(e)
	case map[string]any:
		return redactURL(str(e["url"]))
	}
	return str(v)
}

// redactURL hides a password in a URL shown on a page.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); !ok {
		return s
	}
	name := url.User(u.User.Username()).String()
	u.User = url.User(u.User.Username())
	return strings.Replace(u.String(), "//"+name+"@", "//"+name+":*****@", 1)
}

// repProgress is a replication's progress in percent, -1 when unknown;
// console.js computes it the same way.
func repProgress(state string, info map[string]any) int {
	if state == "completed" {
		return 100
	}
	read, _ := info["docs_read"].(float64)
	if pend, ok := info["changes_pending"].(float64); ok && read+pend > 0 {
		return int(100 * read / (read + pend))
	}
	return -1
}

// loadReplication reads _scheduler/docs and _scheduler/jobs; the docs'
// refusal (a non-admin's 401) is the page's problem.
func (c *Console) loadReplication(w http.ResponseWriter, r *http.Request, d *repPage) (*problem, int) {
	a := c.call(w, r, http.MethodGet, "/_scheduler/docs?limit=200", nil)
	if !a.ok() {
		return problemOf("The replications could not be read (a server admin's page).", a), a.Status
	}
	var out struct {
		Docs []struct {
			DocID      string         `json:"doc_id"`
			Source     any            `json:"source"`
			Target     any            `json:"target"`
			State      string         `json:"state"`
			Info       map[string]any `json:"info"`
			ErrorCount int            `json:"error_count"`
		} `json:"docs"`
	}
	_ = a.decode(&out)
	d.Docs = nil
	for _, x := range out.Docs {
		rd := repDoc{DocID: x.DocID, Source: endpointName(x.Source), Target: endpointName(x.Target), State: x.State,
			Errors: x.ErrorCount, Progress: repProgress(x.State, x.Info)}
		if e, ok := x.Info["error"]; ok {
			rd.Error = str(e)
		}
		if v, ok := x.Info["docs_written"]; ok {
			rd.Written = str(v)
		}
		d.Docs = append(d.Docs, rd)
	}
	j := c.call(w, r, http.MethodGet, "/_scheduler/jobs?limit=200", nil)
	if !j.ok() {
		d.JobsProb = problemOf("The replication jobs could not be read.", j)
		return nil, 200
	}
	var jobs struct {
		Jobs []struct {
			ID      string `json:"id"`
			DocID   any    `json:"doc_id"`
			Source  any    `json:"source"`
			Target  any    `json:"target"`
			Node    string `json:"node"`
			History []struct {
				Type      string `json:"type"`
				Timestamp string `json:"timestamp"`
				Reason    any    `json:"reason"`
			} `json:"history"`
		} `json:"jobs"`
	}
	_ = j.decode(&jobs)
	d.Jobs = nil
	for _, x := range jobs.Jobs {
		rj := repJob{ID: x.ID, Source: endpointName(x.Source), Target: endpointName(x.Target), Node: x.Node}
		if x.DocID != nil {
			rj.DocID = str(x.DocID)
		}
		if len(x.History) > 0 {
			h := x.History[0]
			rj.Last = h.Type + " at " + h.Timestamp
			if h.Reason != nil {
				rj.Last += ": " + str(h.Reason)
			}
		}
		d.Jobs = append(d.Jobs, rj)
	}
	return nil, 200
}

func (c *Console) replication(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	p := s.page("Replication")
	d := &repPage{}
	p.Data = d
	prob, st := c.loadReplication(w, r, d)
	p.Problem = prob
	if r.URL.Query().Get("created") != "" {
		p.Notice = "Replication document created."
	}
	if r.URL.Query().Get("cancelled") != "" {
		p.Notice = "Replication cancelled: its document was deleted."
	}
	c.render(w, r, st, "replication", p)
}

// createReplication writes a doc into _replicator (PUT with an id, POST
// without).
func (c *Console) createReplication(w http.ResponseWriter, r *http.Request) {
	s, ok := c.changer(w, r)
	if !ok {
		return
	}
	f := r.PostForm
	d := &repPage{ID: strings.TrimSpace(f.Get("id")), Source: strings.TrimSpace(f.Get("source")), Target: strings.TrimSpace(f.Get("target")),
		Continuous: f.Get("continuous") != "", CreateTarg: f.Get("create_target") != ""}
	fail := func(st int, prob *problem) {
		p := s.page("Replication")
		c.loadReplication(w, r, d)
		p.Problem, p.Data = prob, d
		c.render(w, r, st, "replication", p)
	}
	if d.Source == "" || d.Target == "" {
		fail(http.StatusBadRequest, &problem{Message: "Not created: a replication needs a source and a target."})
		return
	}
	doc := map[string]any{"source": d.Source, "target": d.Target}
	if d.Continuous {
		doc["continuous"] = true
	}
	if d.CreateTarg {
		doc["create_target"] = true
	}
	b, _ := json.Marshal(doc)
	var a answer
	if d.ID != "" {
		a = c.call(w, r, http.MethodPut, docPath("_replicator", d.ID), b)
	} else {
		a = c.call(w, r, http.MethodPost, "/_replicator", b)
	}
	if !a.ok() {
		fail(a.Status, problemOf("The replication document was not created.", a))
		return
	}
	http.Redirect(w, r, Prefix+"/replication?created=1", http.StatusSeeOther)
}

// cancelReplication deletes the replication's doc (CouchDB's way).
func (c *Console) cancelReplication(w http.ResponseWriter, r *http.Request) {
	s, ok := c.changer(w, r)
	if !ok {
		return
	}
	id := r.PostFormValue("doc_id")
	fail := func(st int, prob *problem) {
		p := s.page("Replication")
		d := &repPage{}
		c.loadReplication(w, r, d)
		p.Problem, p.Data = prob, d
		c.render(w, r, st, "replication", p)
	}
	g := c.call(w, r, http.MethodGet, docPath("_replicator", id), nil)
	var doc struct {
		Rev string `json:"_rev"`
	}
	if !g.ok() || g.decode(&doc) != nil {
		fail(g.Status, problemOf("Not cancelled: the replication document "+strconv.Quote(id)+" could not be read.", g))
		return
	}
	a := c.call(w, r, http.MethodDelete, docPath("_replicator", id)+"?rev="+url.QueryEscape(doc.Rev), nil)
	if !a.ok() {
		fail(a.Status, problemOf("The replication was not cancelled.", a))
		return
	}
	http.Redirect(w, r, Prefix+"/replication?cancelled=1", http.StatusSeeOther)
}

// --- cluster ------------------------------------------------------------

type nodeRow struct {
	Name string
	Up   bool
}

type clusterPage struct {
	Nodes    []nodeRow
	DBs      []string
	DB       string
	Ranges   []shardRow
	ShardErr *problem
}

type shardRow struct {
	Range string
	Held  []bool // by Nodes
}

func (c *Console) cluster(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	p := s.page("Cluster")
	d := &clusterPage{DB: r.URL.Query().Get("db")}
	p.Data = d
	a := c.call(w, r, http.MethodGet, "/_membership", nil)
	if !a.ok() {
		p.Problem = problemOf("The cluster's membership could not be read (a server admin's page).", a)
		c.render(w, r, a.Status, "cluster", p)
		return
	}
	var m struct {
		All     []string `json:"all_nodes"`
		Cluster []string `json:"cluster_nodes"`
	}
	_ = a.decode(&m)
	up := map[string]bool{}
	for _, n := range m.All {
		up[n] = true
	}
	names := append([]string(nil), m.Cluster...)
	for _, n := range m.All {
		if !contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		// a member of cluster_nodes that all_nodes does not list is down
		d.Nodes = append(d.Nodes, nodeRow{Name: n, Up: up[n]})
	}
	if l := c.call(w, r, http.MethodGet, "/_all_dbs", nil); l.ok() {
		_ = l.decode(&d.DBs)
	}
	if d.DB == "" {
		for _, db := range d.DBs {
			if !strings.HasPrefix(db, "_") {
				d.DB = db
				break
			}
		}
	}
	if d.DB != "" {
		sh := c.call(w, r, http.MethodGet, dbPath(d.DB)+"/_shards", nil)
		if !sh.ok() {
			d.ShardErr = problemOf("The shards of "+strconv.Quote(d.DB)+" could not be read.", sh)
		} else {
			var out struct {
				Shards map[string][]string `json:"shards"`
			}
			_ = sh.decode(&out)
			ranges := make([]string, 0, len(out.Shards))
			for rg := range out.Shards {
				ranges = append(ranges, rg)
			}
			sort.Strings(ranges)
			for _, rg := range ranges {
				row := shardRow{Range: rg}
				for _, n := range d.Nodes {
					row.Held = append(row.Held, contains(out.Shards[rg], n.Name))
				}
				d.Ranges = append(d.Ranges, row)
			}
		}
	}
	c.render(w, r, http.StatusOK, "cluster", p)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// --- config -------------------------------------------------------------

type cfgSection struct {
	Name string
	Keys []cfgKey
}

type cfgKey struct{ Key, Value string }

type configPage struct {
	Sections                []cfgSection
	Section, Key, Value     string
	Old                     string
	Confirm, Exists, Edited bool
}

func (c *Console) loadConfig(w http.ResponseWriter, r *http.Request) (map[string]map[string]string, answer) {
	a := c.call(w, r, http.MethodGet, "/_node/_local/_config", nil)
	var m map[string]map[string]string
	if a.ok() {
		_ = a.decode(&m)
	}
	return m, a
}

func sections(m map[string]map[string]string) []cfgSection {
	var out []cfgSection
	for s, kv := range m {
		sec := cfgSection{Name: s}
		for k, v := range kv {
			sec.Keys = append(sec.Keys, cfgKey{k, v})
		}
		sort.Slice(sec.Keys, func(i, j int) bool { return sec.Keys[i].Key < sec.Keys[j].Key })
		out = append(out, sec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// config is the node's _config by section, with an edit form for the
// key named in ?section=&key= (or a new one).
func (c *Console) config(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	p := s.page("Configuration of " + c.cfg.NodeName)
	q := r.URL.Query()
	d := &configPage{Section: q.Get("section"), Key: q.Get("key")}
	p.Data = d
	m, a := c.loadConfig(w, r)
	if !a.ok() {
		p.Problem = problemOf("The node's configuration could not be read (a server admin's page).", a)
		c.render(w, r, a.Status, "config", p)
		return
	}
	d.Sections = sections(m)
	d.Old, d.Exists = m[d.Section][d.Key]
	d.Value = d.Old
	if q.Get("set") != "" {
		p.Notice = "Set [" + d.Section + "] " + d.Key + "."
	}
	c.render(w, r, http.StatusOK, "config", p)
}

// setConfig is the edit form's POST: step=confirm shows the old and the
// new value and asks again; step=apply writes it.
func (c *Console) setConfig(w http.ResponseWriter, r *http.Request) {
	s, ok := c.changer(w, r)
	if !ok {
		return
	}
	p := s.page("Configuration of " + c.cfg.NodeName)
	f := r.PostForm
	d := &configPage{Section: strings.TrimSpace(f.Get("section")), Key: strings.TrimSpace(f.Get("key")), Value: f.Get("value"), Edited: true}
	p.Data = d
	m, a := c.loadConfig(w, r)
	if !a.ok() {
		p.Problem = problemOf("Nothing was changed: the node's configuration could not be read (a server admin's page).", a)
		c.render(w, r, a.Status, "config", p)
		return
	}
	d.Sections = sections(m)
	d.Old, d.Exists = m[d.Section][d.Key]
	if d.Section == "" || d.Key == "" {
		p.Problem = &problem{Message: "Nothing was changed: name the section and the key."}
		c.render(w, r, http.StatusBadRequest, "config", p)
		return
	}
	if f.Get("step") != "apply" {
		d.Confirm = true
		c.render(w, r, http.StatusOK, "config", p)
		return
	}
	b, _ := json.Marshal(d.Value)
	res := c.call(w, r, http.MethodPut, "/_node/_local/_config/"+url.PathEscape(d.Section)+"/"+url.PathEscape(d.Key), b)
	if !res.ok() {
		p.Problem = problemOf("The value was not set.", res)
		c.render(w, r, res.Status, "config", p)
		return
	}
	http.Redirect(w, r, Prefix+"/config?"+url.Values{"set": {"1"}, "section": {d.Section}, "key": {d.Key}}.Encode(), http.StatusSeeOther)
}

// --- graphs -------------------------------------------------------------

type graphsPage struct {
	Nodes []string
	One   bool
}

// graphs is one set of graphs per node (?node= one of them); console.js
// polls each node's /_node/{node}/_history and draws them.
func (c *Console) graphs(w http.ResponseWriter, r *http.Request) {
	s, ok := c.user(w, r)
	if !ok {
		return
	}
	p := s.page("Graphs: the last 15 minutes")
	d := &graphsPage{}
	if n := r.URL.Query().Get("node"); n != "" {
		d.Nodes, d.One = []string{n}, true
	} else if a := c.call(w, r, http.MethodGet, "/_membership", nil); a.ok() {
		var m struct {
			Cluster []string `json:"cluster_nodes"`
		}
		_ = a.decode(&m)
		d.Nodes = m.Cluster
		sort.Strings(d.Nodes)
	} else {
		p.Problem = problemOf("The cluster's nodes could not be read (a server admin's page).", a)
		p.Data = d
		c.render(w, r, a.Status, "graphs", p)
		return
	}
	if len(d.Nodes) == 0 {
		d.Nodes = []string{"_local"}
	}
	p.Data = d
	c.render(w, r, http.StatusOK, "graphs", p)
}
