package bench

import (
	"fmt"
	"io"
)

// PartitionsSide is one database's figures for one kind of query. Rates
// are per second, latencies in milliseconds.
type PartitionsSide struct {
	Hz    float64 `json:"hz"` // queries/s, all clients together
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	Sec   float64 `json:"sec"`
	Rows  int64   `json:"rows"` // rows (docs for _find) of all answers
}

// PartitionsQuery is one kind of query on both databases.
type PartitionsQuery struct {
	Partitioned PartitionsSide `json:"partitioned"`
	Global      PartitionsSide `json:"global"`
	Ratio       float64        `json:"ratio"` // partitioned q/s / global q/s
}

// PartitionsBuild is one index's build on one database: from the design
// doc's PUT (or POST _index) until its first queries answered 200, 500
// timeouts included (the query is then sent again).
type PartitionsBuild struct {
	Sec      float64 `json:"sec"`
	Hz       float64 `json:"hz"`      // Docs / Sec
	Queries  int     `json:"queries"` // first queries waited for: shard ranges (partitioned) or 1
	Timeouts int     `json:"timeouts"`
}

// PartitionsResult is what the partitions workload measures.
type PartitionsResult struct {
	URL           string `json:"url"` // without credentials
	DB            string `json:"db"`  // the partitioned one
	GlobalDB      string `json:"global_db"`
	Docs          int    `json:"docs"` // in each db
	Partitions    int    `json:"partitions"`
	DocSize       string `json:"doc_size"`
	DocBytes      int    `json:"doc_bytes"`
	Lookups       int    `json:"lookups"` // queries of each kind on each db
	Concurrency   int    `json:"concurrency"`
	Q             int    `json:"q"` // as the server reports it (0: unknown)
	ServerVersion string `json:"server_version"`
	ServerVendor  string `json:"server_vendor"`
	Client        string `json:"client"`

	LoadSec       float64 `json:"load_sec"` // the partitioned db
	LoadHz        float64 `json:"load_hz"`  // docs/s
	GlobalLoadSec float64 `json:"global_load_sec"`
	GlobalLoadHz  float64 `json:"global_load_hz"`

	ViewBuild        PartitionsBuild `json:"view_build"`
	GlobalViewBuild  PartitionsBuild `json:"global_view_build"`
	MangoBuild       PartitionsBuild `json:"mango_build"`
	GlobalMangoBuild PartitionsBuild `json:"global_mango_build"`

	View    PartitionsQuery `json:"view"`
	AllDocs PartitionsQuery `json:"all_docs"`
	Find    PartitionsQuery `json:"find"`

	WallSec float64 `json:"wall_sec"`
}

// WriteText prints the result: a line a phase, the partitioned db's figure,
// the global db's, and for the queries their ratio.
func (r *PartitionsResult) WriteText(w io.Writer) {
	fmt.Fprintf(w, "partitions: %d docs in each db, %d partitions, q=%d, doc size %s (~%d bytes), server %s %s, %s\n",
		r.Docs, r.Partitions, r.Q, r.DocSize, r.DocBytes, orUnknown(r.ServerVendor), orUnknown(r.ServerVersion), r.URL)
	const row = "%-27s %-34s %-34s %s\n"
	fmt.Fprintf(w, row, "", "partitioned", "global", "ratio")
	load := func(hz, sec float64) string { return fmt.Sprintf("%.0f docs/s (%.2fs)", hz, sec) }
	fmt.Fprintf(w, row, "load (_bulk_docs):", load(r.LoadHz, r.LoadSec), load(r.GlobalLoadHz, r.GlobalLoadSec), "")
	build := func(b PartitionsBuild) string {
		s := fmt.Sprintf("%.0f docs/s (%.2fs", b.Hz, b.Sec)
		if b.Queries > 1 {
			s += fmt.Sprintf(", %d ranges", b.Queries)
		}
		if b.Timeouts > 0 {
			s += fmt.Sprintf(", %d x 500 timeout", b.Timeouts)
		}
		return s + ")"
	}
	fmt.Fprintf(w, row, "view build (first query):", build(r.ViewBuild), build(r.GlobalViewBuild), "")
	fmt.Fprintf(w, row, "mango build (first _find):", build(r.MangoBuild), build(r.GlobalMangoBuild), "")
	side := func(s PartitionsSide) string {
		return fmt.Sprintf("%.0f q/s, p50 %s, p99 %s", s.Hz, fmtMs(s.P50Ms), fmtMs(s.P99Ms))
	}
	for _, q := range []struct {
		name string
		q    PartitionsQuery
	}{
		{"view, g range:", r.View},
		{"_all_docs of a partition:", r.AllDocs},
		{"_find, g range:", r.Find},
	} {
		fmt.Fprintf(w, row, q.name, side(q.q.Partitioned), side(q.q.Global), fmt.Sprintf("%.2f", q.q.Ratio))
	}
	rows := func(q PartitionsQuery) float64 { return float64(q.Partitioned.Rows) / float64(max(1, r.Lookups)) }
	fmt.Fprintf(w, "(%d queries of each kind on each db, %d clients; rows an answer: view %.1f, _all_docs %.1f, _find %.1f)\n",
		r.Lookups, r.Concurrency, rows(r.View), rows(r.AllDocs), rows(r.Find))
}
