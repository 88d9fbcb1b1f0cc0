/*
 * settee patch (not part of upstream badger v4.9.6): see SETTEE.md.
 */

package badger

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func setteeOpen(t *testing.T, dir string) *DB {
	t.Helper()
	opt := DefaultOptions(dir).WithValueThreshold(64).WithValueLogFileSize(1 << 20).
		WithMemTableSize(1 << 20).WithLogger(nil)
	db, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// setteeFlatten flushes the memtable and merges the whole tree.
func setteeFlatten(t *testing.T, db *DB) {
	t.Helper()
	if err := db.FlushMemtable(); err != nil {
		t.Fatal(err)
	}
	if err := db.FlattenAll(1); err != nil {
		t.Fatal(err)
	}
}

func setteeVlogFiles(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func setteeVal(round, i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("r%d-k%d;", round, i)), 100)
}

// Every key is overwritten round after round, then the old rounds' values
// are unreferenced once the tree is flattened: their files go, unread, the
// latest values and a value an open transaction still reads stay.
func TestDropUnreferencedValueLogs(t *testing.T) {
	dir := t.TempDir()
	db := setteeOpen(t, dir)
	defer func() { _ = db.Close() }()
	const keys, rounds = 100, 30
	write := func(round int) {
		wb := db.NewWriteBatch()
		for i := 0; i < keys; i++ {
			if err := wb.Set([]byte(fmt.Sprintf("k%03d", i)), setteeVal(round, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := wb.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for r := 0; r < rounds; r++ {
		write(r)
	}
	// an old snapshot pins round rounds-1's values of k000
	old := db.NewTransaction(false)
	defer old.Discard()
	for r := rounds; r < 2*rounds; r++ {
		write(r)
	}
	// a key written once, early, stays live in an old file
	if err := db.Update(func(txn *Txn) error { return txn.Set([]byte("early"), setteeVal(-1, 0)) }); err != nil {
		t.Fatal(err)
	}
	for r := 2 * rounds; r < 3*rounds; r++ {
		write(r)
	}
	before := setteeVlogFiles(t, dir)
	if err := db.FlushMemtable(); err != nil {
		t.Fatal(err)
	}
	if db.lc.levels[0].numTables() == 0 {
		t.Fatal("FlushMemtable left level 0 empty")
	}
	setteeFlatten(t, db)
	files, n, err := db.DropUnreferencedValueLogs(nil)
	if err != nil {
		t.Fatal(err)
	}
	after := setteeVlogFiles(t, dir)
	t.Logf("vlog files %d -> %d, dropped %d (%d bytes)", before, after, files, n)
	if files == 0 || n == 0 || after > before-files+1 {
		t.Fatalf("dropped %d files (%d bytes), %d -> %d on disk", files, n, before, after)
	}
	check := func(txn *Txn, key string, want []byte) {
		t.Helper()
		item, err := txn.Get([]byte(key))
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		got, err := item.ValueCopy(nil)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: got %.20q, want %.20q", key, got, want)
		}
	}
	if err := db.View(func(txn *Txn) error {
		for i := 0; i < keys; i++ {
			check(txn, fmt.Sprintf("k%03d", i), setteeVal(3*rounds-1, i))
		}
		check(txn, "early", setteeVal(-1, 0))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check(old, "k000", setteeVal(rounds-1, 0))

	// once the snapshot is gone, the versions it kept go with the next
	// compaction that merges them (here: the next round's)
	old.Discard()
	write(3 * rounds)
	setteeFlatten(t, db)
	files, _, err = db.DropUnreferencedValueLogs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("the snapshot's files stayed after it was discarded")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = setteeOpen(t, dir)
	if err := db.View(func(txn *Txn) error {
		check(txn, "early", setteeVal(-1, 0))
		check(txn, "k099", setteeVal(3*rounds, 99))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// FlushMemtable while writers write: nothing is lost, nothing blocks.
func TestFlushMemtableUnderWrites(t *testing.T) {
	db := setteeOpen(t, t.TempDir())
	defer func() { _ = db.Close() }()
	const writers, each = 4, 300
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func(w int) {
			for i := 0; i < each; i++ {
				if err := db.Update(func(txn *Txn) error {
					return txn.Set([]byte(fmt.Sprintf("w%d-%04d", w, i)), setteeVal(w, i))
				}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
	}
	flushes := 0
	for done := 0; done < writers; {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
			done++
		default:
			if err := db.FlushMemtable(); err != nil {
				t.Fatal(err)
			}
			flushes++
		}
	}
	if err := db.FlushMemtable(); err != nil {
		t.Fatal(err)
	}
	if n := db.lc.levels[0].numTables() + db.lc.lastLevel().numTables(); n == 0 {
		t.Fatal("no table after the flushes")
	}
	if err := db.View(func(txn *Txn) error {
		for w := 0; w < writers; w++ {
			for i := 0; i < each; i++ {
				item, err := txn.Get([]byte(fmt.Sprintf("w%d-%04d", w, i)))
				if err != nil {
					return err
				}
				got, err := item.ValueCopy(nil)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, setteeVal(w, i)) {
					return fmt.Errorf("w%d-%04d: wrong value", w, i)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d flushes during %d writes", flushes, writers*each)
}

// A crash in the middle of a stepwise deletion leaves a value-log file cut
// at a megabyte boundary: badger opens, and the next drop deletes it.
func TestShortenedValueLogAfterCrash(t *testing.T) {
	dir := t.TempDir()
	db := setteeOpen(t, dir)
	for r := 0; r < 20; r++ {
		if err := db.Update(func(txn *Txn) error {
			for i := 0; i < 50; i++ {
				if err := txn.Set([]byte(fmt.Sprintf("k%03d", i)), bytes.Repeat(setteeVal(r, i), 10)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	setteeFlatten(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// what a kill -9 during setteeDeleteLogFile leaves: the oldest file,
	// all garbage by now, shortened (to a step boundary; the files are
	// small here, so to half their size)
	first := filepath.Join(dir, fmt.Sprintf("%06d.vlog", 1))
	fi, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(first, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	db = setteeOpen(t, dir)
	defer func() { _ = db.Close() }()
	setteeFlatten(t, db)
	files, _, err := db.DropUnreferencedValueLogs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first); !os.IsNotExist(err) || files == 0 {
		t.Fatalf("shortened file still there (%v), %d files dropped", err, files)
	}
	if err := db.View(func(txn *Txn) error {
		item, err := txn.Get([]byte("k049"))
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if !bytes.Equal(v, bytes.Repeat(setteeVal(19, 49), 10)) {
				return fmt.Errorf("k049: wrong value")
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
}

// A read transaction left open holds the discard watermark below its read
// timestamp; once it is discarded, the watermark passes it.
func TestWatermarks(t *testing.T) {
	db := setteeOpen(t, t.TempDir())
	defer func() { _ = db.Close() }()
	set := func(k string) {
		if err := db.Update(func(txn *Txn) error { return txn.Set([]byte(k), []byte("v")) }); err != nil {
			t.Fatal(err)
		}
	}
	set("a")
	_, readTs := db.Watermarks() // what the next read transaction reads at
	open := db.NewTransaction(false)
	for _, k := range []string{"b", "c", "d"} {
		set(k)
	}
	time.Sleep(50 * time.Millisecond) // badger processes marks in a goroutine
	if d, last := db.Watermarks(); d >= readTs || last < readTs+3 {
		t.Fatalf("with a read at %d open: discard %d, last commit %d", readTs, d, last)
	}
	open.Discard()
	set("e")
	for i := 0; ; i++ {
		if d, _ := db.Watermarks(); d > readTs {
			break
		}
		if i == 200 {
			d, last := db.Watermarks()
			t.Fatalf("read at %d discarded: discard %d, last commit %d", readTs, d, last)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
