/*
 * settee patch (not part of upstream badger v4.9.6): see SETTEE.md.
 */

package badger

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A process killed between creating the next memtable's file and sizing
// it leaves an empty .mem file. The DB must open again, with every
// committed write (settee's crash test TestKillDuringViewBuild met it:
// "while opening memtables err: while opening fid: 1 err: Create a new
// file").
func TestEmptyMemFileAfterKill(t *testing.T) {
	dir := t.TempDir()
	db := setteeOpen(t, dir)
	err := db.Update(func(txn *Txn) error {
		for i := range 100 {
			if err := txn.Set(fmt.Appendf(nil, "k%03d", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// the next memtable's file, created and not yet sized
	empty := filepath.Join(dir, fmt.Sprintf("%05d%s", 99, memFileExt))
	if err := os.WriteFile(empty, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	db = setteeOpen(t, dir)
	defer db.Close()
	err = db.View(func(txn *Txn) error {
		for i := range 100 {
			if _, err := txn.Get(fmt.Appendf(nil, "k%03d", i)); err != nil {
				return fmt.Errorf("k%03d: %w", i, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Fatalf("the empty memtable file is still there: %v", err)
	}
}
