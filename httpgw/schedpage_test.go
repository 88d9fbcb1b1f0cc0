package httpgw

import "testing"

// TestSchedulerPage: limit and skip of /_scheduler/jobs and docs slice the
// list; total_rows stays the count, offset is skip at most the count (as
// CouchDB's min(Skip, Total)).
func TestSchedulerPage(t *testing.T) {
	t.Parallel()
	in := []byte(`{"total_rows":3,"offset":0,"jobs":[{"id":"a"},{"id":"b"},{"id":"c"}]}`)
	for _, c := range []struct {
		limit, skip int
		want        string
	}{
		{-1, 0, string(in)},
		{1, 0, `{"total_rows":3,"offset":0,"jobs":[{"id":"a"}]}` + "\n"},
		{2, 1, `{"total_rows":3,"offset":1,"jobs":[{"id":"b"},{"id":"c"}]}` + "\n"},
		{-1, 2, `{"total_rows":3,"offset":2,"jobs":[{"id":"c"}]}` + "\n"},
		{5, 7, `{"total_rows":3,"offset":3,"jobs":[]}` + "\n"},
		{0, 0, `{"total_rows":3,"offset":0,"jobs":[]}` + "\n"},
	} {
		if got := string(page(in, "jobs", c.limit, c.skip)); got != c.want {
			t.Errorf("limit %d skip %d: %s, want %s", c.limit, c.skip, got, c.want)
		}
	}
}
