package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// BenchVersion is fabric_bench's ?VERSION, printed as "Bench ver.".
const BenchVersion = "1"

// Result holds the parameters, environment and figures of one run. Rates
// are per second, unrounded (the text output rounds them as fabric_bench
// does); latencies are per request, in milliseconds. A phase that did not
// run (the run failed before it) has a zero *_sec.
type Result struct {
	URL            string `json:"url"` // without credentials
	DB             string `json:"db"`
	Docs           int    `json:"docs"`
	BatchSize      int    `json:"batch_size"`
	DocSize        string `json:"doc_size"`
	DocBytes       int    `json:"doc_bytes"` // upper bound of one encoded doc
	IndividualDocs int    `json:"individual_docs"`
	Gets           int    `json:"gets"`
	Concurrency    int    `json:"concurrency"`
	UpdateSameDoc  bool   `json:"update_same_doc"`
	ReqQ           int    `json:"req_q"` // as asked (0: server default)
	ReqN           int    `json:"req_n"`
	Readers        int    `json:"readers"`
	HotReads       int    `json:"hot_reads"`
	Writers        int    `json:"writers"`
	WriterDocs     int    `json:"writer_docs"`
	NoCeiling      bool   `json:"no_ceiling"`

	Q             int    `json:"q"` // as the server reports it in GET /db (0: unknown)
	N             int    `json:"n"`
	Nodes         int    `json:"nodes"` // len(all_nodes) of /_membership (0: unknown)
	ServerVersion string `json:"server_version"`
	ServerGitSHA  string `json:"server_git_sha"`
	ServerVendor  string `json:"server_vendor"`
	Client        string `json:"client"`

	AddOK       int     `json:"add_ok"`       // batches answered 201
	AddAccepted int     `json:"add_accepted"` // batches answered 202
	AddHz       float64 `json:"add_hz"`       // docs/s
	AddP50Ms    float64 `json:"add_p50_ms"`   // per _bulk_docs request
	AddP99Ms    float64 `json:"add_p99_ms"`
	AddSec      float64 `json:"add_sec"`

	GetHz    float64 `json:"get_hz"`
	GetP50Ms float64 `json:"get_p50_ms"`
	GetP99Ms float64 `json:"get_p99_ms"`
	GetSec   float64 `json:"get_sec"`

	// The get phase's requests, from the same loop, answered by a bare
	// net/http server in this process with the bytes (and Content-Type,
	// ETag, Content-Length) the server answered for one doc:
	// GetCeilingBodyBytes of them; GetCeilingServer says whether that
	// server ran as a child process (CeilingChildProcess, see CeilingChild)
	// or in this one (CeilingInProcess), which answers faster than any
	// other process could. GetCeilingRatio is GetHz/GetCeilingHz. All zero
	// with NoCeiling.
	GetCeilingHz        float64 `json:"get_ceiling_hz"`
	GetCeilingP50Ms     float64 `json:"get_ceiling_p50_ms"`
	GetCeilingP99Ms     float64 `json:"get_ceiling_p99_ms"`
	GetCeilingSec       float64 `json:"get_ceiling_sec"`
	GetCeilingBodyBytes int     `json:"get_ceiling_body_bytes"`
	GetCeilingServer    string  `json:"get_ceiling_server"`
	GetCeilingRatio     float64 `json:"get_ceiling_ratio"`

	// One doc (HotReadDocID) read by Readers clients at once, HotReads
	// GETs in all.
	HotReadDocID string  `json:"hot_read_doc_id"`
	HotReadHz    float64 `json:"hot_read_hz"` // GETs/s
	HotReadP50Ms float64 `json:"hot_read_p50_ms"`
	HotReadP99Ms float64 `json:"hot_read_p99_ms"`
	HotReadSec   float64 `json:"hot_read_sec"`

	AllDocsRows       int64   `json:"all_docs_rows"`
	AllDocsHz         float64 `json:"all_docs_hz"` // rows/s
	AllDocsP50Ms      float64 `json:"all_docs_p50_ms"`
	AllDocsP99Ms      float64 `json:"all_docs_p99_ms"`
	AllDocsFirstRowMs float64 `json:"all_docs_first_row_ms"`
	AllDocsSec        float64 `json:"all_docs_sec"`

	AllDocsIncludeDocsRows       int64   `json:"all_docs_include_docs_rows"`
	AllDocsIncludeDocsHz         float64 `json:"all_docs_include_docs_hz"`
	AllDocsIncludeDocsP50Ms      float64 `json:"all_docs_include_docs_p50_ms"`
	AllDocsIncludeDocsP99Ms      float64 `json:"all_docs_include_docs_p99_ms"`
	AllDocsIncludeDocsFirstRowMs float64 `json:"all_docs_include_docs_first_row_ms"`
	AllDocsIncludeDocsSec        float64 `json:"all_docs_include_docs_sec"`

	ChangesRows       int64   `json:"changes_rows"`
	ChangesHz         float64 `json:"changes_hz"`
	ChangesP50Ms      float64 `json:"changes_p50_ms"`
	ChangesP99Ms      float64 `json:"changes_p99_ms"`
	ChangesFirstRowMs float64 `json:"changes_first_row_ms"`
	ChangesSec        float64 `json:"changes_sec"`

	SingleUpdatesHz    float64 `json:"single_updates_hz"`
	SingleUpdatesP50Ms float64 `json:"single_updates_p50_ms"`
	SingleUpdatesP99Ms float64 `json:"single_updates_p99_ms"`
	SingleUpdatesSec   float64 `json:"single_updates_sec"`

	// WriterDocs new small docs PUT by Writers clients at once, one doc a
	// request; WritersOK answered 201, WritersAccepted 202.
	WritersOK       int     `json:"writers_ok"`
	WritersAccepted int     `json:"writers_accepted"`
	WritersHz       float64 `json:"writers_hz"` // docs/s
	WritersP50Ms    float64 `json:"writers_p50_ms"`
	WritersP99Ms    float64 `json:"writers_p99_ms"`
	WritersSec      float64 `json:"writers_sec"`

	// The add phase again with one _bulk_docs in flight (fabric_bench's
	// loop), into a database of its own (SeqAddDB, deleted after); run
	// only when Concurrency > 1.
	SeqAddDB       string  `json:"seq_add_db"`
	SeqAddOK       int     `json:"seq_add_ok"`
	SeqAddAccepted int     `json:"seq_add_accepted"`
	SeqAddHz       float64 `json:"seq_add_hz"` // docs/s
	SeqAddP50Ms    float64 `json:"seq_add_p50_ms"`
	SeqAddP99Ms    float64 `json:"seq_add_p99_ms"`
	SeqAddSec      float64 `json:"seq_add_sec"`

	// TotalSec is fabric_bench's "Time to run all benchmarks": the add, get,
	// all docs, changes and single update phases (it leaves out all docs
	// w/ include_docs). WallSec is the whole run, setup and cleanup included.
	TotalSec float64 `json:"total_sec"`
	WallSec  float64 `json:"wall_sec"`
}

// WriteText writes r as fabric_bench prints it: the parameters, the
// environment, then one line per completed phase with its p50/p99 latency.
// Run in text mode writes exactly this, piece by piece as phases end.
func (r *Result) WriteText(w io.Writer) {
	r.writeParams(w)
	r.writeEnv(w)
	r.writeInserting(w)
	for i := range numPhases {
		r.writePhase(w, i)
	}
	r.writeTotal(w)
}

func (r *Result) writeParams(w io.Writer) {
	def := func(v int) string {
		if v == 0 {
			return "default"
		}
		return strconv.Itoa(v)
	}
	kv := [][2]string{ // sorted, as log_opts sorts them
		{"batch_size", strconv.Itoa(r.BatchSize)},
		{"concurrency", strconv.Itoa(r.Concurrency)},
		{"doc_size", r.DocSize},
		{"docs", strconv.Itoa(r.Docs)},
		{"gets", strconv.Itoa(r.Gets)},
		{"hot_reads", strconv.Itoa(r.HotReads)},
		{"individual_docs", strconv.Itoa(r.IndividualDocs)},
		{"n", def(r.ReqN)},
		{"q", def(r.ReqQ)},
		{"readers", strconv.Itoa(r.Readers)},
		{"update_same_doc", strconv.FormatBool(r.UpdateSameDoc)},
		{"writer_docs", strconv.Itoa(r.WriterDocs)},
		{"writers", strconv.Itoa(r.Writers)},
	}
	fmt.Fprintf(w, " *** Parameters\n")
	for _, p := range kv {
		fmt.Fprintf(w, " * %-16s : %s\n", p[0], p[1])
	}
}

func (r *Result) writeEnv(w io.Writer) {
	unknown := func(v int) string {
		if v == 0 {
			return "?"
		}
		return strconv.Itoa(v)
	}
	na := func(s string) string {
		if s == "" {
			return "?"
		}
		return s
	}
	fmt.Fprintf(w, "\n *** Environment\n"+
		" * Nodes        : %s\n"+
		" * Bench ver.   : %s\n"+
		" * N            : %s\n"+
		" * Q            : %s\n"+
		" * OS           : n/a over HTTP\n"+
		" * Couch ver.   : %s\n"+
		" * Couch git sha: %s\n"+
		" * VM details   : n/a over HTTP; client %s\n"+
		" * Vendor       : %s\n"+
		" * URL          : %s\n",
		unknown(r.Nodes), BenchVersion, unknown(r.N), unknown(r.Q),
		na(r.ServerVersion), na(r.ServerGitSHA), na(r.Client), na(r.ServerVendor), r.URL)
}

func (r *Result) writeInserting(w io.Writer) {
	fmt.Fprintf(w, "\n *** Inserting %d docs\n", r.Docs)
}

func (r *Result) writeTotal(w io.Writer) {
	if r.TotalSec > 0 {
		fmt.Fprintf(w, " * Time to run all benchmarks            (sec): %7d\n", int64(math.Round(r.TotalSec)))
	}
}

// Phase indexes, in run order.
const (
	phaseAdd = iota
	phaseGet
	phaseGetCeiling
	phaseHotRead
	phaseAllDocs
	phaseAllDocsInclude
	phaseChanges
	phaseSingle
	phaseWriters
	phaseSeqAdd
	numPhases
)

type phaseView struct {
	label             string
	sec, hz, p50, p99 float64
	firstRow          float64
	streamed          bool
	extra             string // appended to the line
}

func (r *Result) phase(i int) phaseView {
	switch i {
	case phaseAdd:
		return phaseView{label: fmt.Sprintf("Add %d docs, ok:%d/accepted:%d", r.Docs, r.AddOK, r.AddAccepted),
			sec: r.AddSec, hz: r.AddHz, p50: r.AddP50Ms, p99: r.AddP99Ms}
	case phaseGet:
		return phaseView{label: fmt.Sprintf("Get random doc %dX", r.Gets),
			sec: r.GetSec, hz: r.GetHz, p50: r.GetP50Ms, p99: r.GetP99Ms}
	case phaseGetCeiling:
		return phaseView{label: fmt.Sprintf("Get ceiling, bare net/http %dX", r.Gets),
			sec: r.GetCeilingSec, hz: r.GetCeilingHz, p50: r.GetCeilingP50Ms, p99: r.GetCeilingP99Ms,
			extra: "  get/ceiling " + strconv.FormatFloat(r.GetCeilingRatio, 'f', 2, 64) + ceilingWhere(r.GetCeilingServer)}
	case phaseHotRead:
		return phaseView{label: fmt.Sprintf("Get one doc, %d clients %dX", r.Readers, r.HotReads),
			sec: r.HotReadSec, hz: r.HotReadHz, p50: r.HotReadP50Ms, p99: r.HotReadP99Ms}
	case phaseAllDocs:
		return phaseView{label: "All docs", sec: r.AllDocsSec, hz: r.AllDocsHz,
			p50: r.AllDocsP50Ms, p99: r.AllDocsP99Ms, firstRow: r.AllDocsFirstRowMs, streamed: true}
	case phaseAllDocsInclude:
		return phaseView{label: "All docs w/ include_docs", sec: r.AllDocsIncludeDocsSec, hz: r.AllDocsIncludeDocsHz,
			p50: r.AllDocsIncludeDocsP50Ms, p99: r.AllDocsIncludeDocsP99Ms, firstRow: r.AllDocsIncludeDocsFirstRowMs, streamed: true}
	case phaseChanges:
		return phaseView{label: "Changes", sec: r.ChangesSec, hz: r.ChangesHz,
			p50: r.ChangesP50Ms, p99: r.ChangesP99Ms, firstRow: r.ChangesFirstRowMs, streamed: true}
	case phaseSingle:
		return phaseView{label: fmt.Sprintf("Single doc updates %dX", r.IndividualDocs),
			sec: r.SingleUpdatesSec, hz: r.SingleUpdatesHz, p50: r.SingleUpdatesP50Ms, p99: r.SingleUpdatesP99Ms}
	case phaseWriters:
		return phaseView{label: fmt.Sprintf("Put small docs, %d clients %dX", r.Writers, r.WriterDocs),
			sec: r.WritersSec, hz: r.WritersHz, p50: r.WritersP50Ms, p99: r.WritersP99Ms}
	case phaseSeqAdd:
		return phaseView{label: fmt.Sprintf("Add %d docs seq, ok:%d/accepted:%d", r.Docs, r.SeqAddOK, r.SeqAddAccepted),
			sec: r.SeqAddSec, hz: r.SeqAddHz, p50: r.SeqAddP50Ms, p99: r.SeqAddP99Ms}
	}
	panic("bench: bad phase index")
}

// ceilingWhere marks a ceiling line whose server ran in the client's
// process (optimistic: see ceiling.go).
func ceilingWhere(server string) string {
	if server == CeilingInProcess {
		return ", " + server
	}
	return ""
}

// writePhase writes fabric_bench's line for phase i, if it ran:
// io:format(" * ~-38s (Hz): ~7B~n", [Label, hz(T, N)]), then latencies.
func (r *Result) writePhase(w io.Writer, i int) {
	p := r.phase(i)
	if p.sec <= 0 {
		return
	}
	fmt.Fprintf(w, " * %-38s (Hz): %7d   p50 %s  p99 %s", p.label, fabricHz(p.hz), fmtMs(p.p50), fmtMs(p.p99))
	if p.streamed {
		fmt.Fprintf(w, "  first row %s", fmtMs(p.firstRow))
	}
	fmt.Fprintf(w, "%s\n", p.extra)
}

// fabricHz rounds a rate as fabric_bench's hz/2 does: "we are doing very
// rough numbers so emphasize it by rounding a few positions".
func fabricHz(hz float64) int64 {
	h := int64(math.Round(hz))
	var round int64
	switch {
	case h > 100000:
		round = 10000
	case h > 10000:
		round = 1000
	case h > 1000:
		round = 100
	case h > 100:
		round = 10
	default:
		round = 1
	}
	return int64(math.Round(float64(h)/float64(round))) * round
}

// fmtMs formats milliseconds with about three significant digits.
func fmtMs(ms float64) string {
	switch {
	case ms >= 100:
		return strconv.FormatFloat(ms, 'f', 0, 64) + "ms"
	case ms >= 10:
		return strconv.FormatFloat(ms, 'f', 1, 64) + "ms"
	case ms >= 1:
		return strconv.FormatFloat(ms, 'f', 2, 64) + "ms"
	default:
		return strconv.FormatFloat(ms, 'f', 3, 64) + "ms"
	}
}

// stats summarises one phase: count operations (docs or rows) over elapsed,
// and the latency of each request.
type stats struct {
	hz, p50, p99, sec float64
}

func summarize(count int64, elapsed time.Duration, lat []time.Duration) stats {
	s := stats{sec: elapsed.Seconds()}
	if elapsed > 0 {
		s.hz = round2(float64(count) / elapsed.Seconds())
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		s.p50 = ms(percentile(lat, 0.50))
		s.p99 = ms(percentile(lat, 0.99))
	}
	return s
}

// percentile returns the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 } // µs precision

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// writeResult writes a workload's result to out: one JSON object (--json)
// or its text.
func writeResult(out io.Writer, asJSON bool, res interface{ WriteText(io.Writer) }) error {
	if !asJSON {
		res.WriteText(out)
		return nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}
