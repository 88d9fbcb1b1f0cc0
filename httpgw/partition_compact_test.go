//go:build !race

// Compaction runs badger's value-log GC, which races inside badger (see
// compact_test.go): this test runs without -race (scripts/norace.sh, in
// make test); its CouchDB twin, TestPartitionStatsCompactPurgeAsCouchDB,
// runs beside the other partition tests.

package httpgw_test

import (
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// TestPartitionStatsCompactPurge is partitionCompactPurge on settee, with
// badger's value-log files 1 MB so that compaction gives files back.
func TestPartitionStatsCompactPurge(t *testing.T) {
	s := testserver.Start(t, smallVlog)
	partitionCompactPurge(t, s.URL, testserver.AdminUser, testserver.AdminPassword)
}
