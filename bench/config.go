package bench

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"
)

// Errors returned by Run. Failures carry more detail and wrap one of these.
var (
	ErrConfig    = errors.New("bench: invalid config")
	ErrDocSize   = errors.New("bench: unknown doc size")
	ErrStatus    = errors.New("bench: unexpected HTTP status")
	ErrDocErrors = errors.New("bench: per-document errors in _bulk_docs")
	ErrCount     = errors.New("bench: unexpected count")
	ErrResponse  = errors.New("bench: malformed response")
)

// EnvURL names the environment variable read when Config.URL is empty.
const EnvURL = "SETTEE_URL"

// DefaultURL is used when neither Config.URL nor $SETTEE_URL is set.
const DefaultURL = "http://127.0.0.1:5984"

// Config is what `settee bench` is asked to do. Zero fields take the values of
// DefaultConfig (Gets: as many as Docs; Q and N: the server's defaults).
type Config struct {
	// URL of the server, credentials in the userinfo
	// (http://admin:pw@127.0.0.1:5984). Empty: $SETTEE_URL, then DefaultURL.
	URL string
	// Docs is how many docs the add phase inserts with _bulk_docs; the read
	// and streaming phases run over them. fabric_bench: docs.
	Docs int
	// BatchSize is the number of docs per _bulk_docs request.
	BatchSize int
	// DocSize is "small", "medium" or "large".
	DocSize string
	// IndividualDocs is how many single doc PUTs the last phase makes.
	IndividualDocs int
	// Gets is how many random doc GETs the get phase makes; 0 means Docs,
	// which is what fabric_bench does.
	Gets int
	// Q and N are passed as ?q=&n= when the database is created (0: omit).
	Q, N int
	// Concurrency is how many _bulk_docs batches are in flight at once in the
	// add phase (fabric_bench: 1); when it is more than 1, a second add phase
	// with one batch in flight (fabric_bench's own loop) is reported beside
	// it. fabric_bench's other phases are sequential, as in fabric_bench.
	Concurrency int
	// Readers is how many clients read one doc at once in the hot read
	// phase, each over a keep-alive connection of its own (seed 004's
	// ab -c 130); HotReads is how many GETs they make in all (ab -n 10000).
	Readers, HotReads int
	// Writers is how many clients PUT new small docs at once in the many
	// writers phase; WriterDocs is how many docs they write in all.
	Writers, WriterDocs int
	// StreamPasses is how many times each streamed phase (_all_docs, with
	// include_docs, _changes) reads the whole database; its rows/s is the
	// median pass's. One pass of 20,000 rows lasts about 15 ms, short
	// enough for a scheduler hiccup to move the figure by a third.
	StreamPasses int
	// NoCeiling skips the GET ceiling: the get phase's requests sent to a
	// bare net/http server (a child process, see CeilingChild) that answers
	// each with the bytes the server under test answered for one doc.
	NoCeiling bool
	// UpdateSameDoc makes the single-update phase rewrite one doc with its
	// current _rev instead of creating IndividualDocs new docs.
	UpdateSameDoc bool
	// PregenMB bounds the memory of doc bodies generated before a phase's
	// clock starts; beyond it, generation overlaps the requests.
	PregenMB int
	// JSON prints one JSON object (Result) to out instead of text lines; the
	// text lines then go to progress.
	JSON bool
	// ProgressEvery is the interval of progress lines (default 1s).
	ProgressEvery time.Duration
	// Workload is "" (fabric_bench), "compaction" (compaction.go) or
	// "views" (views.go).
	Workload string
	// Edits is how many times the compaction workload updates every doc.
	Edits int
	// DataDir is the server's data directory, measured by the compaction
	// workload (HTTP cannot see the disk); empty: not measured.
	DataDir string
	// WriterDB is where the compaction workload's concurrent writer PUTs:
	// WriterSame ("" too), the compacted database, or WriterOther, a
	// database of its own (auto-compaction working on one database while
	// an application writes another), or WriterNone: no writer, the
	// compaction alone (how fast it goes when it need not yield).
	WriterDB string
	// Lookups is how many key lookups with include_docs the views workload
	// makes, Concurrency at a time; 0 means 2000.
	Lookups int
	// NewDocs is how many docs the views workload writes before its last
	// timed query (the incremental index update); 0 means 1000.
	NewDocs int
	// Partitions is how many partitions the partitions workload spreads
	// its docs over; 0 means DefaultPartitions.
	Partitions int
	// Hostile is the flood workload's hostile connections (0: 1000),
	// FloodTime each of its timed runs (0: 10 s), ServerPID the node's
	// process, whose RSS it reads (0: the node's own count, over HTTP).
	Hostile   int
	FloodTime time.Duration
	ServerPID int
}

// Values of Config.WriterDB.
const (
	WriterSame  = "same"
	WriterOther = "other"
	WriterNone  = "none"
)

// DefaultConfig returns fabric_bench's defaults (docs 100000, batch_size
// 1000, doc_size medium, individual_docs 1000) plus the HTTP client's and
// those of the many-client phases (130 clients, 10000 requests, as seed
// 004's ab -c 130 -n 10000).
func DefaultConfig() Config {
	return Config{
		Docs:           100000,
		BatchSize:      1000,
		DocSize:        DocMedium,
		IndividualDocs: 1000,
		Concurrency:    4,
		Readers:        130,
		HotReads:       10000,
		Writers:        130,
		WriterDocs:     10000,
		StreamPasses:   5,
		PregenMB:       256,
		ProgressEvery:  time.Second,
	}
}

// RegisterFlags binds c's fields to flags on fs, with DefaultConfig's values
// as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	fs.StringVar(&c.URL, "url", "", "server URL with credentials in the userinfo, e.g. http://admin:pw@127.0.0.1:5984 (default $"+EnvURL+", then "+DefaultURL+")")
	fs.IntVar(&c.Docs, "docs", d.Docs, "docs to insert with _bulk_docs; the read and streaming phases run over them")
	fs.IntVar(&c.BatchSize, "batch-size", d.BatchSize, "docs per _bulk_docs request")
	fs.StringVar(&c.DocSize, "doc-size", d.DocSize, "doc size: small, medium (~14.6 KB) or large (~146 KB)")
	fs.IntVar(&c.IndividualDocs, "individual-docs", d.IndividualDocs, "single doc PUTs in the last phase")
	fs.IntVar(&c.Gets, "gets", 0, "random doc GETs (default: as many as --docs, like fabric_bench)")
	fs.IntVar(&c.Q, "q", 0, "shards of the bench database, ?q= on create (default: server's)")
	fs.IntVar(&c.N, "n", 0, "copies of each shard, ?n= on create (default: server's)")
	fs.IntVar(&c.Concurrency, "concurrency", d.Concurrency, "_bulk_docs batches in flight during adds (1 = fabric_bench); above 1, a second add phase into a database of its own, one batch in flight (fabric_bench's loop), is reported beside")
	fs.IntVar(&c.Readers, "readers", d.Readers, "hot read phase: clients reading one doc at once, a keep-alive connection each (ab -c)")
	fs.IntVar(&c.HotReads, "hot-reads", d.HotReads, "hot read phase: GETs of the one doc in all (ab -n)")
	fs.IntVar(&c.Writers, "writers", d.Writers, "many writers phase: clients PUTting new small docs at once")
	fs.IntVar(&c.WriterDocs, "writer-docs", d.WriterDocs, "many writers phase: small docs PUT in all")
	fs.IntVar(&c.StreamPasses, "stream-passes", d.StreamPasses, "streamed phases (_all_docs, include_docs, _changes): whole reads of each, rows/s from the median pass (fabric_bench: 1)")
	fs.BoolVar(&c.NoCeiling, "no-ceiling", false, "skip the GET ceiling: the get phase's requests sent to a bare net/http server (this binary started again) answering one doc's bytes")
	fs.BoolVar(&c.UpdateSameDoc, "update-same-doc", false, "single doc phase updates one doc with its _rev instead of creating new docs")
	fs.IntVar(&c.PregenMB, "pregen-mb", d.PregenMB, "MB of doc bodies generated before a phase's clock starts")
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object with the results instead of text lines")
	fs.StringVar(&c.Workload, "workload", "", "workload: fabric_bench's (default), \"compaction\" (docs edited --edits times, then _compact) or \"views\" (a design doc's index build and queries; --docs default 20000)")
	fs.IntVar(&c.Edits, "edits", 0, "compaction workload: updates of every doc before compacting (default 100)")
	fs.StringVar(&c.DataDir, "data-dir", "", "compaction workload: the server's data directory, to measure its bytes on disk")
	fs.IntVar(&c.Lookups, "lookups", 0, "views workload: key lookups with include_docs, --concurrency at a time (default 2000)")
	fs.IntVar(&c.NewDocs, "new-docs", 0, "views workload: docs written before the last timed query (default 1000)")
	fs.IntVar(&c.Partitions, "partitions", 0, "partitions workload: partitions the docs are spread over (default 100)")
	fs.IntVar(&c.Hostile, "hostile", 0, "flood workload: hostile connections (default 1000)")
	fs.DurationVar(&c.FloodTime, "flood-time", 0, "flood workload: each timed run, alone and in the flood (default 10s)")
	fs.IntVar(&c.ServerPID, "server-pid", 0, "flood workload: the node's process id, to read its RSS from /proc (default: the node's own count from /_node/_local/_system)")
	fs.StringVar(&c.WriterDB, "writer-db", WriterSame, "compaction workload: the concurrent writer PUTs into the compacted database (same) or another one (other), or there is none (none)")
}

// withDefaults fills zero fields from DefaultConfig and resolves the URL.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.URL == "" {
		c.URL = os.Getenv(EnvURL)
	}
	if c.URL == "" {
		c.URL = DefaultURL
	}
	if c.Docs == 0 {
		c.Docs = d.Docs
	}
	if c.BatchSize == 0 {
		c.BatchSize = d.BatchSize
	}
	if c.DocSize == "" {
		c.DocSize = d.DocSize
	}
	if c.IndividualDocs == 0 {
		c.IndividualDocs = d.IndividualDocs
	}
	if c.Gets == 0 {
		c.Gets = c.Docs
	}
	if c.Concurrency == 0 {
		c.Concurrency = d.Concurrency
	}
	if c.Readers == 0 {
		c.Readers = d.Readers
	}
	if c.HotReads == 0 {
		c.HotReads = d.HotReads
	}
	if c.Writers == 0 {
		c.Writers = d.Writers
	}
	if c.WriterDocs == 0 {
		c.WriterDocs = d.WriterDocs
	}
	if c.StreamPasses == 0 {
		c.StreamPasses = d.StreamPasses
	}
	if c.PregenMB == 0 {
		c.PregenMB = d.PregenMB
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = d.ProgressEvery
	}
	return c
}

// Validate reports the first invalid field of c (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("%w: url: %w", ErrConfig, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: url %q: want http(s)://[user:password@]host[:port][/prefix]", ErrConfig, u.Redacted())
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"docs", c.Docs}, {"batch-size", c.BatchSize}, {"individual-docs", c.IndividualDocs},
		{"gets", c.Gets}, {"concurrency", c.Concurrency}, {"pregen-mb", c.PregenMB},
		{"readers", c.Readers}, {"hot-reads", c.HotReads}, {"writers", c.Writers}, {"writer-docs", c.WriterDocs},
		{"stream-passes", c.StreamPasses},
	} {
		if f.v < 1 {
			return fmt.Errorf("%w: --%s must be at least 1, got %d", ErrConfig, f.name, f.v)
		}
	}
	if c.Lookups < 0 || c.NewDocs < 0 || c.Partitions < 0 {
		return fmt.Errorf("%w: --lookups, --new-docs and --partitions must not be negative", ErrConfig)
	}
	if c.Q < 0 || c.N < 0 {
		return fmt.Errorf("%w: --q and --n must not be negative", ErrConfig)
	}
	if c.ProgressEvery < 0 {
		return fmt.Errorf("%w: negative progress interval", ErrConfig)
	}
	switch c.WriterDB {
	case "", WriterSame, WriterOther, WriterNone:
	default:
		return fmt.Errorf("%w: --writer-db %q (want same, other or none)", ErrConfig, c.WriterDB)
	}
	switch c.DocSize {
	case DocSmall, DocMedium, DocLarge:
	default:
		return fmt.Errorf("%w: %q (want small, medium or large)", ErrDocSize, c.DocSize)
	}
	return nil
}
