package views

import (
	"bytes"
	"errors"
	"testing"
)

func TestParseDesign(t *testing.T) {
	for _, tc := range []struct {
		body       string
		code, why  string // "" : no error
		views      int
		sameSigAs  string
		differsSig string
	}{
		{body: `{"views":{"b":{"map":"function(d){emit(1,1)}"},"a":{"map":"function(d){}","reduce":"_count"}}}`, views: 2},
		{body: `{"views":{"a":{"map":"function(d){}","reduce":"_count"},"b":{"map":"function(d){emit(1,1)}"}},"shows":{"x":"f"}}`, views: 2,
			sameSigAs: `{"views":{"b":{"map":"function(d){emit(1,1)}"},"a":{"map":"function(d){}","reduce":"_count"}}}`},
		{body: `{"views":{"a":{"map":"function(d){}","reduce":"_sum"}}}`, views: 1,
			differsSig: `{"views":{"a":{"map":"function(d){}","reduce":"_count"}}}`},
		{body: `{"views":[]}`, code: "invalid_design_doc", why: "`views` field must have object type"},
		{body: `{"views":{"x":"f"}}`, code: "invalid_design_doc", why: "`views.x` field must have object type"},
		{body: `{"views":{"x":{"reduce":"_sum"}}}`, code: "invalid_design_doc", why: "View `x` must contain map function"},
		{body: `{"views":{"x":{"map":5}}}`, code: "invalid_design_doc", why: "`views.x.map` field must have string type"},
		{body: `{"views":{"x":{"map":"f","reduce":"_nope"}}}`, code: "invalid_design_doc", why: "`_nope` is not a supported reduce function."},
		{body: `{"views":{"x":{"map":""}}}`, code: "not_found", why: "missing function"},
		{body: `{"language":5}`, code: "invalid_design_doc", why: "`language` field must have string type"},
		{body: `{"shows":{}}`, views: 0},
	} {
		d, err := ParseDesign("_design/t", []byte(tc.body))
		if tc.code != "" {
			var de *DesignError
			if !errors.As(err, &de) || de.Code != tc.code || de.Reason != tc.why {
				t.Errorf("%s: %v, want %s: %s", tc.body, err, tc.code, tc.why)
			}
			continue
		}
		if err != nil || len(d.Views) != tc.views {
			t.Errorf("%s: %v, %d views", tc.body, err, len(d.Views))
			continue
		}
		if tc.sameSigAs != "" {
			o, _ := ParseDesign("_design/other", []byte(tc.sameSigAs))
			if o.Sig != d.Sig {
				t.Errorf("%s: signature differs from a ddoc with the same views", tc.body)
			}
		}
		if tc.differsSig != "" {
			o, _ := ParseDesign("_design/t", []byte(tc.differsSig))
			if o.Sig == d.Sig {
				t.Errorf("%s: same signature as a ddoc with other views", tc.body)
			}
		}
	}
}

func TestBackIndexRoundTrip(t *testing.T) {
	rows := []backRow{{view: 0, suffix: []byte{1, 2, 3}, size: 40}, {view: 7, suffix: []byte("xyz\x00\xff"), size: 1 << 20}, {view: 2, suffix: nil, size: 0}}
	got := decodeBack(encodeBack(rows))
	if len(got) != len(rows) {
		t.Fatalf("decoded %d rows, want %d", len(got), len(rows))
	}
	for i := range rows {
		if got[i].view != rows[i].view || !bytes.Equal(got[i].suffix, rows[i].suffix) || got[i].size != rows[i].size {
			t.Errorf("row %d: %+v, want %+v", i, got[i], rows[i])
		}
	}
	key, id, value, ok := splitRowValue(rowValue([]byte(`[1,"a"]`), "doc:1", []byte(`{"v":2}`)))
	if !ok || string(key) != `[1,"a"]` || id != "doc:1" || string(value) != `{"v":2}` {
		t.Errorf("row value: %q %q %q %v", key, id, value, ok)
	}
}

func TestGroupKey(t *testing.T) {
	for _, tc := range []struct {
		key   string
		level int
		want  string
	}{
		{`[1,2,3]`, 2, `[1,2]`},
		{`[1,2,3]`, 5, `[1,2,3]`},
		{`[1,2,3]`, 0, `null`},
		{`[1,2,3]`, -1, `[1,2,3]`},
		{`"a"`, 1, `"a"`},
		{`{"a":1}`, 1, `{"a":1}`},
	} {
		if got := string(GroupKey([]byte(tc.key), tc.level)); got != tc.want {
			t.Errorf("GroupKey(%s, %d) = %s, want %s", tc.key, tc.level, got, tc.want)
		}
	}
}

// continueFrom's bound for a descending page must include the row it
// names and nothing above it.
func TestContinueFrom(t *testing.T) {
	a, _ := rowSuffix(nil, []byte(`1`), "a", 0)
	b, _ := rowSuffix(nil, []byte(`1`), "a", 1)
	c, _ := rowSuffix(nil, []byte(`1`), "b", 0)
	end := continueFrom(b, true)
	if bytes.Compare(b, end) >= 0 || bytes.Compare(a, end) >= 0 || bytes.Compare(c, end) < 0 {
		t.Errorf("descending bound %x: a %x b %x c %x", end, a, b, c)
	}
	if start := continueFrom(b, false); !bytes.Equal(start, b) {
		t.Errorf("ascending bound %x, want the row %x", start, b)
	}
}
