package node

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// The history is bounded: past the limit the oldest rows go, in badger
// and in memory, and a reopened log has the same rows and goes on from
// the same seq. A (type, db) noted again moves to the newest seq.
func TestDBUpdatesBoundAndReopen(t *testing.T) {
	dir := t.TempDir()
	open := func() (*badger.DB, *dbUpdates) {
		db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
		if err != nil {
			t.Fatal(err)
		}
		u, err := newDBUpdates(db, slog.New(slog.NewTextHandler(io.Discard, nil)), "0123456789abcdef0123456789abcdef")
		if err != nil {
			t.Fatal(err)
		}
		u.limit, u.exists = 10, func() bool { return true }
		return db, u
	}
	rows := func(u *dbUpdates) []string {
		var out []string
		if _, err := u.read(0, false, -1, func(r DBUpdate) error {
			out = append(out, r.Type+":"+r.DB+"@"+r.Seq[:len(r.Seq)-len(u.suffix)-1])
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	db, u := open()
	for i := range 15 {
		u.note(DBCreated, fmt.Sprintf("db%02d", i))
	}
	u.flush(false)
	u.note(DBCreated, "db07")
	u.noteWrite("db07")
	u.noteWrite("db07") // coalesced
	u.flush(false)
	got := fmt.Sprint(rows(u))
	want := "[created:db06@7 created:db08@9 created:db09@10 created:db10@11 created:db11@12 created:db12@13 created:db13@14 created:db14@15 created:db07@16 updated:db07@17]"
	if got != want || len(u.latest) != 10 {
		t.Fatalf("rows %s (%d in memory), want %s", got, len(u.latest), want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, u = open()
	defer db.Close()
	if got := fmt.Sprint(rows(u)); got != want || u.seq != 17 {
		t.Fatalf("reopened: %s at %d", got, u.seq)
	}
	// descending, limited
	var desc []string
	last, _ := u.read(0, true, 2, func(r DBUpdate) error { desc = append(desc, r.Type+":"+r.DB); return nil })
	if fmt.Sprint(desc) != "[updated:db07 created:db07]" || last != 16 {
		t.Fatalf("descending: %v last %d", desc, last)
	}
	// _global_changes deleted: the history goes, the counter goes on
	u.note(DBDeleted, globalChangesName)
	u.flush(false)
	u.note(DBCreated, "after")
	u.flush(false)
	if got := fmt.Sprint(rows(u)); got != "[created:after@18]" {
		t.Fatalf("after the wipe: %s", got)
	}
}
