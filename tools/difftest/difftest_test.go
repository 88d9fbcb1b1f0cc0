package difftest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/settee/settee/internal/testcouch"
	"github.com/settee/settee/internal/testserver"
)

var (
	fullFlag  = flag.Bool("difftest.full", false, "run the whole corpus, slow sequences too (known counts are not checked)")
	fuzzFlag  = flag.Int("difftest.fuzz", 0, "run this many fuzz sequences after the corpus")
	seedFlag  = flag.Uint64("difftest.seed", 0, "the fuzzer's seed (0: from the clock)")
	stepsFlag = flag.Int("difftest.steps", 30, "requests per fuzz sequence")
	writeFlag = flag.Bool("difftest.write-known", false, "rewrite known.txt (known-cluster.txt for TestDiffCluster) from this run's undeclared and known differences (review the diff)")
	recFlag   = flag.Bool("difftest.record", false, "TestDiffCorpus: write CouchDB's answers to the CI corpus to recorded/ (the recorded corpus TestDiffRecorded replays)")
)

// TestDiffCorpus runs the CI corpus (every sequence not marked slow) on a
// real CouchDB 3.5.2 and a real settee node, and fails on any difference
// not declared in deliberate.txt or known.txt, on a known entry that
// matches more differences than its count, and on one that matches none
// (fixed: remove it). Skipped where there is no CouchDB (testcouch).
func TestDiffCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a CouchDB")
	}
	cs := testcouch.Start(t, "")
	ss := testserver.Start(t)
	r := &Runner{
		Couch:  Target{URLs: []string{cs.URL}, User: cs.User, Password: cs.Password},
		Settee: Target{URLs: []string{ss.URL}, User: testserver.AdminUser, Password: testserver.AdminPassword},
	}
	seqs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	seqs = Select(seqs, "single", !*fullFlag)
	if *recFlag {
		if *fullFlag || *fuzzFlag > 0 {
			t.Fatal("-difftest.record records the CI corpus: not with -difftest.full or -difftest.fuzz")
		}
		r.Record = map[string]*Recording{}
		defer func() {
			if t.Failed() {
				t.Log("not recorded: the run failed")
				return
			}
			if err := WriteRecordings("recorded", r.Record); err != nil {
				t.Fatal(err)
			}
			t.Logf("recorded %d sequences in recorded/", len(r.Record))
		}()
	}
	if *fuzzFlag > 0 {
		seed := *seedFlag
		if seed == 0 {
			seed = uint64(time.Now().UnixNano())
		}
		t.Logf("fuzz: seed %d, %d sequences of %d steps", seed, *fuzzFlag, *stepsFlag)
		seqs = append(seqs, Fuzz(seed, *fuzzFlag, *stepsFlag, "single")...)
	}
	runAndCheck(t, r, seqs, "known.txt", !*fullFlag && *fuzzFlag == 0)
}

// TestDiffRecorded compares settee with the recorded corpus: CouchDB
// 3.5.2's answers to the CI corpus, recorded by TestDiffCorpus
// -difftest.record (recorded/). It needs no CouchDB, so it runs on every
// machine; it fails as TestDiffCorpus does, and on a recording that is
// missing or older than its sequence.
func TestDiffRecorded(t *testing.T) {
	recs, err := Recorded()
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	seqs = Select(seqs, "single", true)
	if err := CheckRecordings(seqs, recs); err != nil {
		t.Fatal(err)
	}
	ss := testserver.Start(t)
	r := &Runner{
		Settee: Target{URLs: []string{ss.URL}, User: testserver.AdminUser, Password: testserver.AdminPassword},
		Replay: recs,
	}
	// the same answers as the live run's, so the same counts
	runAndCheck(t, r, seqs, "known.txt", true)
}

// runAndCheck runs seqs and checks the differences against the declared
// ones of deliberate.txt and the known file; counts says whether its
// counts apply (the CI corpus).
func runAndCheck(t *testing.T, r *Runner, seqs []Sequence, known string, counts bool) {
	t.Helper()
	declared, err := LoadDeclaredWith(known)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx := context.Background()
	var all []Diff
	requests := 0
	for _, seq := range seqs {
		res, err := r.Run(ctx, seq)
		if err != nil {
			t.Fatalf("sequence %s: %v", seq.Name, err)
		}
		requests += res.Requests
		all = append(all, res.Diffs...)
	}
	tally := declared.Classify(all)
	for _, d := range tally.Undeclared {
		t.Errorf("undeclared: %s", d)
	}
	if counts {
		for _, e := range declared.Known {
			switch n := tally.Known[e]; {
			case n > e.Count:
				t.Errorf("%s matched %d differences, more than its count %d: %s %s | %s", e, n, e.Count, e.Method, e.Path, e.Diff)
			case n == 0:
				t.Errorf("%s matched nothing: fixed? remove it (%s %s | %s)", e, e.Method, e.Path, e.Diff)
			case n < e.Count:
				t.Logf("%s matched %d differences, fewer than its count %d: lower it", e, n, e.Count)
			}
		}
	}
	t.Logf("difftest: %d sequences, %d requests in %s: %d differences, %d deliberate (%d entries), %d known (%d entries), %d undeclared",
		len(seqs), requests, time.Since(start).Round(time.Millisecond), len(all),
		Counts(tally.Deliberate), len(tally.Deliberate), Counts(tally.Known), len(tally.Known), len(tally.Undeclared))
	if *writeFlag {
		if err := os.WriteFile(known, []byte(knownFile(declared, tally)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// knownFile renders known.txt: the entries still matching, with their new
// counts, then an entry per step and place of every undeclared difference.
func knownFile(d Declared, t Tally) string {
	var b strings.Builder
	b.WriteString(knownHeader)
	for _, e := range d.Known {
		if n := t.Known[e]; n > 0 {
			fmt.Fprintf(&b, "%d | %s %s | %s | %s\n", n, e.Method, e.Path, e.Diff, e.Reason)
		}
	}
	type key struct{ method, path, diff string }
	counts := map[key]int{}
	first := map[key]Diff{}
	var order []key
	type stepKey struct {
		seq  string
		step int
	}
	statusKey := map[stepKey]key{}
	for _, df := range t.Undeclared {
		if df.Where == "status" {
			statusKey[stepKey{df.Seq, df.Step}] = key{df.Method, df.Path, df.Key()}
		}
	}
	for _, df := range t.Undeclared {
		k, ok := statusKey[stepKey{df.Seq, df.Step}]
		if !ok {
			// the status entry covers the whole step
			k = key{df.Method, df.Path, df.Where + ": *"}
		}
		if counts[k] == 0 {
			order = append(order, k)
			first[k] = df
		}
		counts[k]++
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].path < order[j].path })
	for _, k := range order {
		fmt.Fprintf(&b, "%d | %s %s | %s | first seen: %s\n", counts[k], k.method, k.path, k.diff, first[k].Key())
	}
	return b.String()
}

const knownHeader = `# Known differences between settee and CouchDB 3.5.2 that are not fixed yet.
# TestDiffCorpus tolerates them; the list may only shrink. Each line:
#   COUNT | METHOD PATH | DIFFERENCE | what is wrong
# COUNT is how many differences the entry matched in TestDiffCorpus's run (the CI corpus):
# more fails the test, none fails it too (the difference is gone: remove the entry).
# PATH is the step's path as the corpus writes it; '*' matches any run of characters in
# PATH and DIFFERENCE. An entry matching a step's status difference covers the whole step.
# go test ./tools/difftest -run TestDiffCorpus -difftest.write-known rewrites this file.
`
