/*
 * settee patch (not part of upstream badger v4.9.6): see SETTEE.md.
 */

package badger

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4/options"
)

// With a gate of one slot and niced builders, memtable flushes and
// compactions (tables compressed inline, written with write(2)) keep every
// value, under writes from two goroutines and a FlattenAll, and the tables
// read back after the DB is opened again without the options.
func TestBackgroundGateKeepsEveryValue(t *testing.T) {
	for _, c := range []options.CompressionType{options.Snappy, options.None} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			dir := t.TempDir()
			opt := DefaultOptions(dir).WithValueThreshold(1024).WithMemTableSize(1 << 20).
				WithBaseTableSize(256 << 10).WithNumLevelZeroTables(2).WithNumCompactors(2).
				WithCompression(c).WithLogger(nil)
			db, err := Open(opt.WithBackgroundCPU(1).WithBackgroundNice(10))
			if err != nil {
				t.Fatal(err)
			}
			const keys, rounds = 2000, 6
			// values kept in the tree, and that do not compress away
			val := func(w, round, i int) []byte {
				v := make([]byte, 20+i%400)
				r := rand.New(rand.NewPCG(uint64(w), uint64(round<<32|i)))
				for j := range v {
					v[j] = byte(r.Uint32())
				}
				return v
			}
			var wg sync.WaitGroup
			errs := make(chan error, 3)
			for w := 0; w < 2; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := 0; r < rounds; r++ {
						wb := db.NewWriteBatch()
						for i := 0; i < keys; i++ {
							if err := wb.Set([]byte(fmt.Sprintf("w%d-k%05d", w, i)), val(w, r, i)); err != nil {
								errs <- err
								return
							}
						}
						if err := wb.Flush(); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := db.FlattenAll(2); err != nil {
					errs <- err
				}
			}()
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if err := db.FlushMemtable(); err != nil {
				t.Fatal(err)
			}
			if err := db.FlattenAll(2); err != nil {
				t.Fatal(err)
			}
			if m, _ := filepath.Glob(filepath.Join(dir, "*.sst")); len(m) < 2 {
				t.Fatalf("%d tables: the test built too few to mean anything", len(m))
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			db, err = Open(opt)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			err = db.View(func(txn *Txn) error {
				for w := 0; w < 2; w++ {
					for i := 0; i < keys; i++ {
						item, err := txn.Get([]byte(fmt.Sprintf("w%d-k%05d", w, i)))
						if err != nil {
							return fmt.Errorf("w%d k%d: %w", w, i, err)
						}
						v, err := item.ValueCopy(nil)
						if err != nil {
							return err
						}
						if !bytes.Equal(v, val(w, rounds-1, i)) {
							return fmt.Errorf("w%d k%d: %.40q, want round %d", w, i, v, rounds-1)
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
