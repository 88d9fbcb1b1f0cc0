package httpgw

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settee/settee/metrics"
)

// Metrics records every answered request and renders the node's
// Prometheus metrics (GET /_node/_local/_prometheus); package metrics
// implements it.
type Metrics interface {
	ObserveRequest(route, method string, code int, took time.Duration)
	Text() ([]byte, error)
}

// prometheusType is the content type CouchDB 3.5 answers
// /_node/_local/_prometheus with.
const prometheusType = "text/plain; version=0.0.4"

func (g *Gateway) handlePrometheus(rq *req) error {
	if g.cfg.Metrics == nil {
		return errMissing
	}
	b, err := g.cfg.Metrics.Text()
	if err != nil {
		return err
	}
	rawAnswer(rq)
	h := rq.w.Header()
	h.Set("Content-Type", prometheusType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	rq.w.WriteHeader(200)
	if rq.r.Method != http.MethodHead {
		_, _ = rq.w.Write(b)
	}
	return nil
}

// observe hands an answered request to the metrics. rq is nil when the
// request failed before it was parsed.
func (g *Gateway) observe(rq *req, method string, status int, start time.Time) {
	if g.cfg.Metrics == nil {
		return
	}
	route := "other" // a path that did not parse
	if rq != nil && (rq.segs != nil || strings.TrimPrefix(rq.r.URL.Path, "/") == "") {
		route = routeLabel(rq.segs)
	}
	if _, ok := methodIdx[method]; !ok && method != http.MethodOptions {
		method = "other" // a client may send any word
	}
	g.cfg.Metrics.ObserveRequest(route, method, status, time.Since(start))
}

// serverRoutes and dbRoutes are the endpoint names that label requests;
// anything else under "_" is "other" or "db_other".
var (
	serverRoutes = setOf("_up", "_uuids", "_all_dbs", "_dbs_info", "_session", "_active_tasks", "_membership",
		"_replicate", "_scheduler", "_cluster_setup", "_node", "_db_updates", "_utils", "_favicon.ico")
	dbRoutes = setOf("_all_docs", "_design_docs", "_local_docs", "_bulk_docs", "_bulk_get", "_changes",
		"_revs_diff", "_missing_revs", "_security", "_revs_limit", "_shards", "_sync_shards",
		"_ensure_full_commit", "_view_cleanup", "_compact", "_purge", "_purged_infos_limit", "_find", "_index", "_explain")
)

func setOf(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// routeLabel names the endpoint of a request from its path segments with a
// word of a small fixed set ("db", "doc", "attachment", "_bulk_docs", ...):
// never a database, document or node name, which would make a series per
// name.
func routeLabel(segs []string) string {
	if len(segs) == 0 {
		return "root"
	}
	if first := segs[0]; strings.HasPrefix(first, "_") && first != "_users" && first != "_replicator" && first != "_global_changes" {
		if first == "_node" && len(segs) == 3 && segs[2] == metrics.HistoryRoute {
			// its own word: the history leaves its own polling out
			return metrics.HistoryRoute
		}
		if serverRoutes[first] {
			return first
		}
		return "other"
	}
	if len(segs) == 1 {
		return "db"
	}
	switch second := segs[1]; {
	case second == "_local":
		return "_local"
	case second == "_design":
		return docRoute(segs[2:])
	case strings.HasPrefix(second, "_"):
		if dbRoutes[second] {
			return second
		}
		return "db_other"
	}
	return docRoute(segs[1:])
}

// docRoute labels the segments from a doc id on: the doc or one of its
// attachments.
func docRoute(segs []string) string {
	if len(segs) <= 1 {
		return "doc"
	}
	return "attachment"
}
