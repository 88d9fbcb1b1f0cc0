package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// streamRows GETs path and counts the rows of the array under key in the
// top-level object ("rows" of _all_docs, "results" of _changes). It returns
// the row count, the time to the first row and the time of the whole
// request, all measured from before the request is sent.
func (r *runner) streamRows(ctx context.Context, path, rawQuery, key string, done *atomic.Int64) (rows int64, first, total time.Duration, err error) {
	t0 := time.Now()
	resp, err := r.c.do(ctx, http.MethodGet, path, rawQuery, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		return 0, 0, 0, statusError(http.MethodGet, path, resp.StatusCode, b)
	}
	rows, first, err = countRows(bufio.NewReaderSize(resp.Body, 64<<10), key, t0, done)
	if err != nil {
		_ = resp.Body.Close() // do not read the rest of a broken stream
		return rows, first, 0, fmt.Errorf("GET %s?%s: %w", path, rawQuery, err)
	}
	drain(resp.Body) // trailing whitespace; keeps the connection reusable
	return rows, first, time.Since(t0), nil
}

// streamRow is the part of a row that is checked: _all_docs and _changes
// rows both carry the doc id. Decoding into it still scans the whole row
// (doc included), like fabric_bench's callbacks encode each row.
type streamRow struct {
	ID string `json:"id"`
}

// countRows reads {"…": …, key: [row, row, …], "…": …} from rd with the
// json.Decoder token API, decoding one row at a time: rows are never
// collected. done is incremented per row; first is the time from t0 to the
// start of the first row.
func countRows(rd io.Reader, key string, t0 time.Time, done *atomic.Int64) (rows int64, first time.Duration, err error) {
	dec := json.NewDecoder(rd)
	if err := expectDelim(dec, '{'); err != nil {
		return 0, 0, err
	}
	found := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return rows, first, fmt.Errorf("%w: %w", ErrResponse, err)
		}
		if k, _ := tok.(string); k != key {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return rows, first, fmt.Errorf("%w: %w", ErrResponse, err)
			}
			continue
		}
		found = true
		if err := expectDelim(dec, '['); err != nil {
			return rows, first, err
		}
		var row streamRow
		for dec.More() {
			if rows == 0 {
				first = time.Since(t0)
			}
			row.ID = ""
			if err := dec.Decode(&row); err != nil {
				return rows, first, fmt.Errorf("%w: row %d: %w", ErrResponse, rows, err)
			}
			if row.ID == "" {
				return rows, first, fmt.Errorf("%w: row %d has no id", ErrResponse, rows)
			}
			rows++
			done.Add(1)
		}
		if err := expectDelim(dec, ']'); err != nil {
			return rows, first, err
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return rows, first, err
	}
	if !found {
		return 0, 0, fmt.Errorf("%w: no %q array", ErrResponse, key)
	}
	return rows, first, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: want %q: %w", ErrResponse, want, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("%w: want %q, got %v", ErrResponse, want, tok)
	}
	return nil
}
