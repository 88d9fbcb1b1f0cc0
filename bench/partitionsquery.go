package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// pquery is one timed request and what its answer must hold.
type pquery struct {
	method, path, query string
	body                []byte
	part                int   // the partition
	want                []int // doc indexes, in the order of the answer
}

// pqueries is one kind of query: the same queries on both dbs, and the
// check of an answer.
type pqueries struct {
	part, global []pquery
	check        func(q pquery, b []byte) (int, error)
}

// firstPart is the partitioned db's first query of each partition of reps
// (the first query of that partition among part, else a new one like it).
func (q *pqueries) firstPart(reps []int) []pquery {
	out := make([]pquery, 0, len(reps))
	for _, k := range reps {
		i := slices.IndexFunc(q.part, func(pq pquery) bool { return pq.part == k })
		if i >= 0 {
			out = append(out, q.part[i])
			continue
		}
		pq := q.part[0]
		pq.path = replacePartition(pq.path, pq.part, k)
		pq.part = k
		out = append(out, pq)
	}
	return out
}

// replacePartition rewrites /db/_partition/p<from>/… to p<to>.
func replacePartition(path string, from, to int) string {
	old := "/_partition/p" + strconv.Itoa(from) + "/"
	i := strings.Index(path, old)
	if i < 0 {
		return path
	}
	return path[:i] + "/_partition/p" + strconv.Itoa(to) + "/" + path[i+len(old):]
}

type partitionQueries struct {
	view, allDocs, find pqueries
}

// queries builds Lookups queries of each kind for both dbs, over random
// partitions and ranges of g (seeded: every run asks the same).
func (p *partitionsRun) queries() partitionQueries {
	n := p.cfg.Lookups
	rng := newPCG(2)
	var qs partitionQueries
	qs.view.check, qs.allDocs.check, qs.find.check = p.checkViewRows, p.checkAllDocsRows, p.checkFindAnswer
	limit := strconv.Itoa(len(p.byPart[0]) + 1) // the largest partition's docs, and one
	for range n {
		k := rng.IntN(p.cfg.Partitions)
		lo := rng.IntN(100 - partitionWidth + 1)
		hi := lo + partitionWidth - 1
		part := p.partName(k)
		inRange := p.inRange(k, lo, hi)
		pp := p.part.dbPath + "/_partition/" + part

		// the view: rows by key, then id; the global key starts with the partition
		q := url.Values{}
		q.Set("startkey", strconv.Itoa(lo))
		q.Set("endkey", strconv.Itoa(hi))
		qs.view.part = append(qs.view.part, pquery{method: http.MethodGet, path: pp + "/_design/" + partDDoc + "/_view/" + partView,
			query: q.Encode(), part: k, want: inRange})
		q = url.Values{}
		q.Set("startkey", `["`+part+`",`+strconv.Itoa(lo)+`]`)
		q.Set("endkey", `["`+part+`",`+strconv.Itoa(hi)+`]`)
		qs.view.global = append(qs.view.global, pquery{method: http.MethodGet, path: p.global.dbPath + "/_design/" + partDDoc + "/_view/" + globalView,
			query: q.Encode(), part: k, want: inRange})

		// _all_docs: the whole partition, in id order
		qs.allDocs.part = append(qs.allDocs.part, pquery{method: http.MethodGet, path: pp + "/_all_docs", part: k, want: p.byPart[k]})
		q = url.Values{}
		q.Set("startkey", `"`+part+`:"`)
		q.Set("endkey", `"`+part+`;"`)
		qs.allDocs.global = append(qs.allDocs.global, pquery{method: http.MethodGet, path: p.global.dbPath + "/_all_docs",
			query: q.Encode(), part: k, want: p.byPart[k]})

		// _find: the view's range, checked as a set
		rangeSel := `"g":{"$gte":` + strconv.Itoa(lo) + `,"$lte":` + strconv.Itoa(hi) + `}`
		tail := `},"fields":["_id","g"],"limit":` + limit + `}`
		qs.find.part = append(qs.find.part, pquery{method: http.MethodPost, path: pp + "/_find",
			body: []byte(`{"selector":{` + rangeSel + tail), part: k, want: inRange})
		qs.find.global = append(qs.find.global, pquery{method: http.MethodPost, path: p.global.dbPath + "/_find",
			body: []byte(`{"selector":{"part":"` + part + `",` + rangeSel + tail), part: k, want: inRange})
	}
	return qs
}

// inRange is the docs of partition k with lo <= g <= hi, by g then id (a
// view's order).
func (p *partitionsRun) inRange(k, lo, hi int) []int {
	var out []int
	for _, i := range p.byPart[k] {
		if p.g[i] >= lo && p.g[i] <= hi {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return p.g[a] - p.g[b] })
	return out
}

func partDDocBody() []byte {
	return []byte(`{"language":"javascript","options":{"partitioned":true},"views":{"` + partView + `":{"map":` +
		strconv.Quote(mapPartitionedByG) + `}}}`)
}

func globalDDocBody() []byte {
	return []byte(`{"language":"javascript","views":{"` + globalView + `":{"map":` + strconv.Quote(mapGlobalByPartG) + `}}}`)
}

func partMangoIndexBody() []byte {
	return []byte(`{"index":{"fields":["g"]},"ddoc":"` + partMangoDDoc + `","name":"` + partMangoIndex + `","type":"json","partitioned":true}`)
}

func globalMangoIndexBody() []byte {
	return []byte(`{"index":{"fields":["part","g"]},"ddoc":"` + partMangoDDoc + `","name":"` + globalMangoIndex + `","type":"json"}`)
}

// viewRows is a view or _all_docs answer: the rows' ids and values (the
// answers hold no docs, so decoding them whole is cheap).
type viewRows struct {
	Rows *[]struct {
		ID    string          `json:"id"`
		Value json.RawMessage `json:"value"`
	} `json:"rows"`
}

// checkViewRows checks a view answer: the docs q.want, in order, each
// with its n as the value.
func (p *partitionsRun) checkViewRows(q pquery, b []byte) (int, error) {
	var v viewRows
	if err := json.Unmarshal(b, &v); err != nil || v.Rows == nil {
		return 0, fmt.Errorf("%w: not a view answer: %.200q", ErrResponse, b)
	}
	rows := *v.Rows
	if len(rows) != len(q.want) {
		return len(rows), fmt.Errorf("%w: %d rows, want %d", ErrCount, len(rows), len(q.want))
	}
	for k, row := range rows {
		i := q.want[k]
		if row.ID != p.docPartID(i) || string(row.Value) != strconv.Itoa(p.n[i]) {
			return len(rows), fmt.Errorf("%w: row %d is %s with value %s, want %s with %d", ErrResponse, k, row.ID, row.Value, p.docPartID(i), p.n[i])
		}
	}
	return len(rows), nil
}

// checkAllDocsRows checks an _all_docs answer: the partition's docs, in id
// order.
func (p *partitionsRun) checkAllDocsRows(q pquery, b []byte) (int, error) {
	var v viewRows
	if err := json.Unmarshal(b, &v); err != nil || v.Rows == nil {
		return 0, fmt.Errorf("%w: not an _all_docs answer: %.200q", ErrResponse, b)
	}
	rows := *v.Rows
	if len(rows) != len(q.want) {
		return len(rows), fmt.Errorf("%w: %d rows, want %d", ErrCount, len(rows), len(q.want))
	}
	for k, row := range rows {
		if want := p.docPartID(q.want[k]); row.ID != want {
			return len(rows), fmt.Errorf("%w: row %d is %s, want %s", ErrResponse, k, row.ID, want)
		}
	}
	return len(rows), nil
}

// checkFindAnswer checks a _find answer: the docs q.want in any order
// (Mango promises no order without a sort), each with just _id and its g.
func (p *partitionsRun) checkFindAnswer(q pquery, b []byte) (int, error) {
	a, err := parseFind(b)
	if err != nil {
		return len(a.docs), err
	}
	if len(a.docs) != len(q.want) {
		return len(a.docs), fmt.Errorf("%w: %d docs, want %d", ErrCount, len(a.docs), len(q.want))
	}
	want := make(map[string]int, len(q.want))
	for _, i := range q.want {
		want[p.docPartID(i)] = i
	}
	for k, d := range a.docs {
		i, ok := want[d.id]
		if !ok || d.has != hasID|hasG || d.fields != 2 || d.g != p.g[i] {
			return len(a.docs), fmt.Errorf("%w: doc %d is %+v, not one of the %d wanted (with _id and g only)", ErrResponse, k, d, len(q.want))
		}
		delete(want, d.id)
	}
	return len(a.docs), nil
}
