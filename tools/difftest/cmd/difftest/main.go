// Command difftest runs settee's differential tester (package
// tools/difftest) against a running CouchDB and a running settee: the
// corpus, or the fuzzer's sequences from a seed. It prints every
// difference not declared in deliberate.txt or known.txt and exits 1 if
// there is one. docs/difftest.md says how to start the two servers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"syscall"
	"time"

	"github.com/settee/settee/tools/difftest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "difftest:", err)
		os.Exit(2)
	}
}

func run() error {
	couch := flag.String("couchdb", os.Getenv("DIFFTEST_COUCHDB"), "CouchDB base URL(s) with admin credentials, comma-separated for a cluster ($DIFFTEST_COUCHDB)")
	settee := flag.String("settee", os.Getenv("DIFFTEST_SETTEE"), "settee base URL(s) with admin credentials, comma-separated for a cluster ($DIFFTEST_SETTEE)")
	corpusDir := flag.String("corpus", "", "read the corpus from this directory instead of the built-in one")
	only := flag.String("run", "", "only the sequences whose name matches this regexp")
	ci := flag.Bool("ci", false, "leave out the slow sequences (the CI corpus)")
	fuzz := flag.Int("fuzz", 0, "instead of the corpus, run this many generated sequences")
	seed := flag.Uint64("seed", 0, "the fuzzer's seed (0: from the clock; printed either way)")
	steps := flag.Int("steps", 30, "requests per generated sequence")
	all := flag.Bool("all", false, "print declared differences too")
	asJSON := flag.Bool("json", false, "print differences as JSON lines")
	verbose := flag.Bool("v", false, "log every request")
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ct, err := difftest.ParseTarget(*couch)
	if err != nil {
		return fmt.Errorf("-couchdb: %w", err)
	}
	st, err := difftest.ParseTarget(*settee)
	if err != nil {
		return fmt.Errorf("-settee: %w", err)
	}
	if len(ct.URLs) != len(st.URLs) {
		return fmt.Errorf("-couchdb has %d nodes, -settee %d", len(ct.URLs), len(st.URLs))
	}
	mode := "single"
	if len(ct.URLs) > 1 {
		mode = "cluster"
	}
	knownFile := "known.txt"
	if mode == "cluster" {
		knownFile = "known-cluster.txt"
	}
	declared, err := difftest.LoadDeclaredWith(knownFile)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r := &difftest.Runner{Couch: ct, Settee: st, Logger: log}

	var seqs []difftest.Sequence
	if *fuzz > 0 {
		if *seed == 0 {
			*seed = uint64(time.Now().UnixNano())
		}
		fmt.Printf("fuzz: seed %d, %d sequences of %d steps\n", *seed, *fuzz, *steps)
		seqs = difftest.Fuzz(*seed, *fuzz, *steps, mode)
	} else {
		if *corpusDir != "" {
			seqs, err = difftest.LoadCorpus(os.DirFS(*corpusDir), ".")
		} else {
			seqs, err = difftest.Corpus()
		}
		if err != nil {
			return err
		}
		seqs = difftest.Select(seqs, mode, *ci)
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		var keep []difftest.Sequence
		for _, s := range seqs {
			if re.MatchString(s.Name) {
				keep = append(keep, s)
			}
		}
		seqs = keep
	}

	start := time.Now()
	var requests, undeclared, deliberate, known int
	perEntry := map[*difftest.Entry]int{}
	for _, seq := range seqs {
		res, err := r.Run(ctx, seq)
		if err != nil {
			return fmt.Errorf("sequence %s: %w", seq.Name, err)
		}
		requests += res.Requests
		t := declared.Classify(res.Diffs)
		undeclared += len(t.Undeclared)
		deliberate += difftest.Counts(t.Deliberate)
		known += difftest.Counts(t.Known)
		for e, n := range t.Deliberate {
			perEntry[e] += n
		}
		for e, n := range t.Known {
			perEntry[e] += n
		}
		print := t.Undeclared
		if *all {
			print = res.Diffs
		}
		for _, d := range print {
			if *asJSON {
				b, _ := json.Marshal(d)
				fmt.Println(string(b))
			} else {
				fmt.Println(d)
			}
		}
		if *fuzz > 0 && len(t.Undeclared) > 0 {
			b, _ := json.MarshalIndent([]difftest.Sequence{seq}, "", " ")
			fmt.Printf("fuzz: sequence %s (seed %d) differs; as a corpus file:\n%s\n", seq.Name, *seed, b)
		}
	}
	entries := make([]*difftest.Entry, 0, len(perEntry))
	for e := range perEntry {
		entries = append(entries, e)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].String() < entries[j].String() })
	for _, e := range entries {
		fmt.Printf("declared %s matched %d: %s %s | %s\n", e, perEntry[e], e.Method, e.Path, e.Diff)
	}
	fmt.Printf("difftest: %d sequences, %d requests, %s: %d undeclared differences, %d deliberate, %d known\n",
		len(seqs), requests, time.Since(start).Round(time.Millisecond), undeclared, deliberate, known)
	if *fuzz > 0 {
		fmt.Printf("fuzz: seed %d\n", *seed)
	}
	if undeclared > 0 {
		os.Exit(1)
	}
	return nil
}
