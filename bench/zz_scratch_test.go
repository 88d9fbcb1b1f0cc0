package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

func TestZZBig(t *testing.T) {
	f := newFakeCouch(t, basic("admin", "pw"))
	cfg := Config{URL: f.url("admin", "pw"), Docs: 20000, DocSize: DocMedium, IndividualDocs: 200, Gets: 2000, PregenMB: 64, ProgressEvery: 500 * time.Millisecond}
	res, err := Run(context.Background(), cfg, os.Stdout, os.Stderr)
	if err != nil { t.Fatal(err) }
	_ = res
}
