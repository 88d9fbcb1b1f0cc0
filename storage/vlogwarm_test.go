package storage

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// nextGCFile names the file badger's value-log GC rewrites, step after
// step: it reads badger's discard statistics (the DISCARD file) as badger
// keeps them. A badger whose layout differs fails here.
func TestPredictValueLogGC(t *testing.T) {
	dir := t.TempDir()
	opts := badger.DefaultOptions(dir).WithDetectConflicts(false).WithValueThreshold(1024).
		WithMemTableSize(8 << 20).WithValueLogFileSize(1 << 20).WithLogger(nil)
	db, err := badger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// 2 KB values in ~1 MB files; later rounds overwrite a different share
	// of the keys, so files hold different amounts of garbage
	val := make([]byte, 2048)
	for round, every := range []int{1, 2, 3, 5} {
		for lo := 0; lo < 3000; lo += 100 {
			err := db.Update(func(txn *badger.Txn) error {
				for i := lo; i < lo+100; i++ {
					if i%every == 0 {
						val[0] = byte(round)
						if err := txn.Set(fmt.Appendf(nil, "k%05d", i), val); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// what a reclamation does before GC: the deletions reach the tree
	if err := db.FlushMemtable(); err != nil {
		t.Fatal(err)
	}
	if err := db.FlattenAll(1); err != nil {
		t.Fatal(err)
	}
	steps := 0
	for {
		want := nextGCFile(dir, 0.5, 0)
		err := db.RunValueLogGC(0.5)
		if errors.Is(err, badger.ErrNoRewrite) {
			if want != "" {
				t.Errorf("step %d: predicted %s, GC rewrote nothing", steps, want)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		steps++
		if want == "" {
			t.Fatalf("step %d: GC rewrote a file, none predicted", steps)
		}
		if _, err := os.Stat(want); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("step %d: predicted %s, which GC left (err %v)", steps, want, err)
		}
	}
	if steps < 3 {
		t.Fatalf("GC rewrote %d files, want several to check", steps)
	}
}
