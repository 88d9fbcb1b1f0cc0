package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/settee/settee/docjson"
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

// countRows reads {"…": …, key: [row, row, …], "…": …} from rd and counts
// the rows of the array under key, checking that each is an object with an
// "id" member. It is a one-pass structural scanner over the bytes (strings,
// escapes, nesting), not a decoder: json.Decoder tops out near 140 MB/s,
// which capped the include_docs phase at the client rather than the server.
// Rows are never collected. done is incremented per row; first is the time
// from t0 to the start of the first row.
func countRows(rd io.Reader, key string, t0 time.Time, done *atomic.Int64) (rows int64, first time.Duration, err error) {
	var sc rowScanner
	sc.key = key
	buf := make([]byte, 64<<10)
	for {
		n, rerr := rd.Read(buf)
		if n > 0 {
			before := sc.rows
			if err := sc.scan(buf[:n]); err != nil {
				return sc.rows, first, fmt.Errorf("%w: %w", ErrResponse, err)
			}
			if before == 0 && sc.rows > 0 {
				first = time.Since(t0)
			}
			done.Add(sc.rows - before)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return sc.rows, first, fmt.Errorf("%w: %w", ErrResponse, rerr)
		}
	}
	if !sc.finished {
		return sc.rows, first, fmt.Errorf("%w: truncated response", ErrResponse)
	}
	if !sc.found {
		return 0, 0, fmt.Errorf("%w: no %q array", ErrResponse, key)
	}
	return sc.rows, first, nil
}

// rowScanner is the state of countRows between reads. It is not docjson's
// walker, which needs a whole value in memory: a response is read in 64 KB
// chunks and never kept, so the scanner carries its state (in a string, an
// escape, the open containers) from one read to the next; and unlike
// docjson.SkipValue it checks that brackets match. A string that ends in
// the chunk it starts in, the common case, is skipped with docjson's
// SkipString all the same.
type rowScanner struct {
	key      string
	stack    []byte // '{' or '[' per open container
	inStr    bool
	esc      bool
	str      []byte // the current string, when it may be a key we look at
	keep     bool   // str is being captured
	wantKey  bool   // the next string in this object is a key
	lastKey  string // last key at depth 1
	inRows   bool
	found    bool
	hasID    bool
	rows     int64
	finished bool
}

func (s *rowScanner) scan(b []byte) error {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
				s.endString()
				continue
			}
			if s.keep {
				s.str = append(s.str, c)
			}
			continue
		}
		switch c {
		case '"':
			d := len(s.stack)
			// keys of the top object, and keys of row objects
			s.keep = s.wantKey && (d == 1 || (d == 3 && s.inRows))
			s.str = s.str[:0]
			if e := docjson.SkipString(b, i); e >= 0 {
				if s.keep {
					s.str = append(s.str, b[i+1:e-1]...)
				}
				s.endString()
				i = e - 1
			} else {
				s.inStr = true // cut by the end of b: the rest comes a byte at a time
			}
		case '{', '[':
			if s.finished {
				return fmt.Errorf("data after the top-level object")
			}
			d := len(s.stack)
			if d == 0 && c != '{' {
				return fmt.Errorf("response is not an object")
			}
			if d == 1 && c == '[' && s.lastKey == s.key {
				s.inRows, s.found = true, true
			}
			if d == 2 && s.inRows {
				if c != '{' {
					return fmt.Errorf("row %d is not an object", s.rows)
				}
				s.hasID = false
			}
			s.stack = append(s.stack, c)
			s.wantKey = c == '{'
		case '}', ']':
			d := len(s.stack)
			if d == 0 || (c == '}') != (s.stack[d-1] == '{') {
				return fmt.Errorf("mismatched %q", c)
			}
			s.stack = s.stack[:d-1]
			if d == 3 && s.inRows {
				if !s.hasID {
					return fmt.Errorf("row %d has no id", s.rows)
				}
				s.rows++
			}
			if d == 2 && s.inRows {
				s.inRows = false
			}
			if d == 1 {
				s.finished = true
			}
			s.wantKey = false
		case ',':
			if d := len(s.stack); d > 0 && s.stack[d-1] == '{' {
				s.wantKey = true
			}
		case ':':
			s.wantKey = false
		}
	}
	return nil
}

func (s *rowScanner) endString() {
	if !s.keep {
		return
	}
	s.keep = false
	switch len(s.stack) {
	case 1:
		s.lastKey = string(s.str)
	case 3:
		if string(s.str) == "id" {
			s.hasID = true
		}
	}
}
