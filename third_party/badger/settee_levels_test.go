/*
 * settee patch (not part of upstream badger v4.9.6): see SETTEE.md.
 */

package badger

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// DropPrefix and FlattenAll run at once (a database deleted while the
// node reclaims after a compaction): neither may restart the compactors
// while the other works on the levels. Each round drops one prefix while
// another goroutine flattens; afterwards the dropped prefix is gone and
// every kept key has its newest value. Before setteeLevelsMu, -race saw
// the two race on db.closers.compactors, and settee found another
// database's keys in a database created after such a drop.
func TestDropPrefixBesideFlattenAll(t *testing.T) {
	db := setteeOpen(t, t.TempDir())
	defer db.Close()
	put := func(prefix string, round int) {
		t.Helper()
		err := db.Update(func(txn *Txn) error {
			for i := range 50 {
				if err := txn.Set(fmt.Appendf(nil, "%s/%03d", prefix, i), setteeVal(round, i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 12
	for round := range rounds {
		put("keep", round)
		put(fmt.Sprintf("drop%02d", round), round)
		if err := db.FlushMemtable(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var flatErr, dropErr error
		wg.Go(func() { flatErr = db.FlattenAll(1) })
		wg.Go(func() {
			dropErr = db.DropPrefix(fmt.Appendf(nil, "drop%02d/", round))
			for errors.Is(dropErr, ErrBlockedWrites) {
				dropErr = db.DropPrefix(fmt.Appendf(nil, "drop%02d/", round))
			}
		})
		wg.Wait()
		if flatErr != nil || dropErr != nil {
			t.Fatalf("round %d: FlattenAll %v, DropPrefix %v", round, flatErr, dropErr)
		}
	}
	err := db.View(func(txn *Txn) error {
		it := txn.NewIterator(DefaultIteratorOptions)
		defer it.Close()
		kept := 0
		for it.Rewind(); it.Valid(); it.Next() {
			k := string(it.Item().Key())
			var i int
			if _, err := fmt.Sscanf(k, "keep/%03d", &i); err != nil {
				return fmt.Errorf("key %q left after its prefix was dropped", k)
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if string(v) != string(setteeVal(rounds-1, i)) {
				return fmt.Errorf("%s: an older value", k)
			}
			kept++
		}
		if kept != 50 {
			return fmt.Errorf("%d kept keys, want 50", kept)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
