package cdeflate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// zlib's parameters for windowBits 15 and memLevel 8.
const (
	minMatch     = 3
	maxMatch     = 258
	minLookahead = maxMatch + minMatch + 1
	wBits        = 15
	wSize        = 1 << wBits
	wMask        = wSize - 1
	windowSize   = 2 * wSize
	maxDist      = wSize - minLookahead
	hashBits     = 8 + 7
	hashSize     = 1 << hashBits
	hashMask     = hashSize - 1
	hashShift    = (hashBits + minMatch - 1) / minMatch
	litBufsize   = 1 << (8 + 6)
	winInit      = maxMatch
	tooFar       = 4096

	// windowPad lets longestMatch read 8 bytes at a time past the last
	// byte it can compare; what it reads there never counts.
	windowPad = 16
)

// config is a row of zlib's configuration_table.
type config struct {
	good, lazy, nice, chain int
	slow                    bool // deflate_slow, else deflate_fast
}

var configTable = [10]config{
	{0, 0, 0, 0, false}, // 0: stored, not supported here
	{4, 4, 8, 4, false},
	{4, 5, 16, 8, false},
	{4, 6, 32, 32, false},
	{4, 4, 16, 16, true},
	{8, 16, 32, 32, true},
	{8, 16, 128, 128, true},
	{8, 32, 128, 256, true},
	{32, 128, 258, 1024, true},
	{32, 258, 258, 4096, true},
}

// ErrLevel is returned by NewWriter for a level outside 1..9.
var ErrLevel = errors.New("cdeflate: level must be 1..9")

// ErrClosed is returned by a Write after Close.
var ErrClosed = errors.New("cdeflate: write after close")

// Writer gzips what is written to it into an underlying writer, as
// zlib's deflate with windowBits 16+15, memLevel 8 and the default
// strategy does with Z_NO_FLUSH for each Write and Z_FINISH at Close.
type Writer struct {
	w      io.Writer
	err    error
	level  int
	cfg    config
	header bool // the gzip header is written
	closed bool

	in      []byte // input not yet read into the window
	crc     uint32
	totalIn uint32

	window    []byte
	prev      [wSize]uint16
	head      [hashSize]uint16
	highWater int
	insH      int

	strstart       int
	blockStart     int // may go negative when the window slides
	lookahead      int
	insert         int
	matchStart     int
	matchLength    int
	prevMatch      int
	prevLength     int
	matchAvailable bool

	trees
}

// NewWriter returns a Writer compressing at level (1..9) into w. Level
// 0 is not offered: CouchDB stores an attachment as it is (identity)
// when compression_level is 0.
func NewWriter(w io.Writer, level int) (*Writer, error) {
	if level < 1 || level > 9 {
		return nil, fmt.Errorf("%w: %d", ErrLevel, level)
	}
	z := &Writer{window: make([]byte, windowSize+windowPad)}
	z.reset(w, level)
	return z, nil
}

// Reset makes z a new Writer into w at z's level, as NewWriter would,
// reusing its memory (about 250 KB).
func (z *Writer) Reset(w io.Writer) {
	window, level, out := z.window, z.level, z.bits.out[:0]
	clear(window)
	*z = Writer{window: window}
	z.bits.out = out
	z.reset(w, level)
}

func (z *Writer) reset(w io.Writer, level int) {
	z.w, z.level, z.cfg = w, level, configTable[level]
	z.matchLength, z.prevLength = minMatch-1, minMatch-1
	z.trees.init()
}

// Gzip returns data gzipped at level as one zlib stream would write it.
func Gzip(data []byte, level int) ([]byte, error) {
	var out sliceWriter
	z, err := NewWriter(&out, level)
	if err != nil {
		return nil, err
	}
	if _, err := z.Write(data); err != nil {
		return nil, err
	}
	if err := z.Close(); err != nil {
		return nil, err
	}
	return out.b, nil
}

type sliceWriter struct{ b []byte }

func (s *sliceWriter) Write(p []byte) (int, error) {
	s.b = append(s.b, p...)
	return len(p), nil
}

// Write compresses p. Whole blocks are written to the underlying writer
// as they are made; the rest waits for more input or Close.
func (z *Writer) Write(p []byte) (int, error) {
	if z.err != nil {
		return 0, z.err
	}
	if z.closed {
		return 0, ErrClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	z.in = p
	z.deflate(false)
	z.in = nil
	z.flushPending()
	if z.err != nil {
		return 0, z.err
	}
	return len(p), nil
}

// Close finishes the stream (the last block and the gzip trailer). It
// does not close the underlying writer.
func (z *Writer) Close() error {
	if z.err != nil || z.closed {
		return z.err
	}
	z.closed = true
	z.deflate(true)
	z.flushPending()
	return z.err
}

func (z *Writer) flushPending() {
	if len(z.bits.out) == 0 || z.err != nil {
		return
	}
	_, z.err = z.w.Write(z.bits.out)
	z.bits.out = z.bits.out[:0]
}

// deflate is zlib's deflate() for a stream whose output space never runs
// out: the header first, then the compressor, then with finish the
// trailer.
func (z *Writer) deflate(finish bool) {
	if !z.header {
		z.header = true
		xfl := byte(0)
		switch {
		case z.level == 9:
			xfl = 2
		case z.level < 2:
			xfl = 4
		}
		z.bits.out = append(z.bits.out, 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, 3)
	}
	if len(z.in) != 0 || z.lookahead != 0 || finish {
		if z.cfg.slow {
			z.deflateSlow(finish)
		} else {
			z.deflateFast(finish)
		}
	}
	if finish {
		c, n := z.crc, z.totalIn
		z.bits.out = append(z.bits.out, byte(c), byte(c>>8), byte(c>>16), byte(c>>24),
			byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	}
}

// readBuf moves up to len(buf) bytes of input into buf.
func (z *Writer) readBuf(buf []byte) int {
	n := copy(buf, z.in)
	z.crc = crc32.Update(z.crc, crc32.IEEETable, buf[:n])
	z.totalIn += uint32(n)
	z.in = z.in[n:]
	return n
}

func (z *Writer) slideHash() {
	for i, m := range z.head {
		if m >= wSize {
			z.head[i] = m - wSize
		} else {
			z.head[i] = 0
		}
	}
	for i, m := range z.prev {
		if m >= wSize {
			z.prev[i] = m - wSize
		} else {
			z.prev[i] = 0
		}
	}
}

// fillWindow is zlib's fill_window: slide the window when strstart nears
// its end, read input, start the hash, and zero the bytes just past the
// data the first time they are reached.
func (z *Writer) fillWindow() {
	win := z.window[:windowSize]
	for {
		more := windowSize - z.lookahead - z.strstart
		if z.strstart >= wSize+maxDist {
			copy(win[:wSize-more], win[wSize:2*wSize-more])
			z.matchStart -= wSize
			z.strstart -= wSize
			z.blockStart -= wSize
			z.slideHash()
			more += wSize
		}
		if len(z.in) == 0 {
			break
		}
		at := z.strstart + z.lookahead
		z.lookahead += z.readBuf(win[at : at+more])

		if z.lookahead+z.insert >= minMatch {
			str := z.strstart - z.insert
			z.insH = int(win[str])
			z.insH = ((z.insH << hashShift) ^ int(win[str+1])) & hashMask
			for z.insert > 0 {
				z.insH = ((z.insH << hashShift) ^ int(win[str+minMatch-1])) & hashMask
				z.prev[str&wMask] = z.head[z.insH]
				z.head[z.insH] = uint16(str)
				str++
				z.insert--
				if z.lookahead+z.insert < minMatch {
					break
				}
			}
		}
		if z.lookahead >= minLookahead || len(z.in) == 0 {
			break
		}
	}
	if z.highWater < windowSize {
		curr := z.strstart + z.lookahead
		if z.highWater < curr {
			init := min(windowSize-curr, winInit)
			clear(win[curr : curr+init])
			z.highWater = curr + init
		} else if z.highWater < curr+winInit {
			init := min(curr+winInit-z.highWater, windowSize-z.highWater)
			clear(win[z.highWater : z.highWater+init])
			z.highWater += init
		}
	}
}

// insertString puts the string at str into the hash chains and returns
// the previous head of its chain.
func (z *Writer) insertString(str int) int {
	z.insH = ((z.insH << hashShift) ^ int(z.window[str+minMatch-1])) & hashMask
	h := z.head[z.insH]
	z.prev[str&wMask] = h
	z.head[z.insH] = uint16(str)
	return int(h)
}

// longestMatch is zlib's longest_match (the portable one): walk the hash
// chain from curMatch, keep the first longest match, stop at nice_match.
// Like zlib it never compares the third byte (the hash makes it equal)
// and compares through strstart+258, past the lookahead.
func (z *Writer) longestMatch(curMatch int) int {
	chain := z.cfg.chain
	win := z.window
	scan := z.strstart
	bestLen := z.prevLength
	nice := z.cfg.nice
	limit := 0
	if z.strstart > maxDist {
		limit = z.strstart - maxDist
	}
	if z.prevLength >= z.cfg.good {
		chain >>= 2
	}
	if nice > z.lookahead {
		nice = z.lookahead
	}
	// zlib compares the bytes at best_len-1, best_len, 0 and 1 before
	// the rest: the same four bytes, two at a time.
	scanStart := binary.LittleEndian.Uint16(win[scan:])
	scanEnd := binary.LittleEndian.Uint16(win[scan+bestLen-1:])
	rest := win[scan+3 : scan+maxMatch+1]
	for {
		if binary.LittleEndian.Uint16(win[curMatch+bestLen-1:]) == scanEnd &&
			binary.LittleEndian.Uint16(win[curMatch:]) == scanStart {
			l := 3 + matchLen(rest, win[curMatch+3:])
			if l > maxMatch {
				l = maxMatch
			}
			if l > bestLen {
				z.matchStart = curMatch
				bestLen = l
				if l >= nice {
					break
				}
				scanEnd = binary.LittleEndian.Uint16(win[scan+bestLen-1:])
			}
		}
		curMatch = int(z.prev[curMatch&wMask])
		if curMatch <= limit {
			break
		}
		chain--
		if chain == 0 {
			break
		}
	}
	if bestLen <= z.lookahead {
		return bestLen
	}
	return z.lookahead
}

// flushBlock is zlib's FLUSH_BLOCK_ONLY.
func (z *Writer) flushBlock(last bool) {
	var buf []byte
	if z.blockStart >= 0 {
		buf = z.window[z.blockStart:z.strstart]
	}
	z.trees.flushBlock(buf, z.strstart-z.blockStart, last)
	z.blockStart = z.strstart
}

// deflateFast is zlib's deflate_fast (levels 1 to 3): no lazy matching,
// and the strings of a match are hashed only when it is short.
func (z *Writer) deflateFast(finish bool) {
	for {
		if z.lookahead < minLookahead {
			z.fillWindow()
			if z.lookahead < minLookahead && !finish {
				return
			}
			if z.lookahead == 0 {
				break
			}
		}
		hashHead := 0
		if z.lookahead >= minMatch {
			hashHead = z.insertString(z.strstart)
		}
		if hashHead != 0 && z.strstart-hashHead <= maxDist {
			z.matchLength = z.longestMatch(hashHead)
		}
		var bflush bool
		if z.matchLength >= minMatch {
			bflush = z.tallyDist(z.strstart-z.matchStart, z.matchLength-minMatch)
			z.lookahead -= z.matchLength
			if z.matchLength <= z.cfg.lazy && z.lookahead >= minMatch {
				z.matchLength--
				for {
					z.strstart++
					z.insertString(z.strstart)
					z.matchLength--
					if z.matchLength == 0 {
						break
					}
				}
				z.strstart++
			} else {
				z.strstart += z.matchLength
				z.matchLength = 0
				z.insH = int(z.window[z.strstart])
				z.insH = ((z.insH << hashShift) ^ int(z.window[z.strstart+1])) & hashMask
			}
		} else {
			bflush = z.tallyLit(z.window[z.strstart])
			z.lookahead--
			z.strstart++
		}
		if bflush {
			z.flushBlock(false)
		}
	}
	z.insert = min(z.strstart, minMatch-1)
	if finish {
		z.flushBlock(true)
		return
	}
	if z.symNext != 0 {
		z.flushBlock(false)
	}
}

// deflateSlow is zlib's deflate_slow (levels 4 to 9): a match is taken
// only when the next position has no longer one.
func (z *Writer) deflateSlow(finish bool) {
	for {
		if z.lookahead < minLookahead {
			z.fillWindow()
			if z.lookahead < minLookahead && !finish {
				return
			}
			if z.lookahead == 0 {
				break
			}
		}
		hashHead := 0
		if z.lookahead >= minMatch {
			hashHead = z.insertString(z.strstart)
		}
		z.prevLength, z.prevMatch = z.matchLength, z.matchStart
		z.matchLength = minMatch - 1
		if hashHead != 0 && z.prevLength < z.cfg.lazy && z.strstart-hashHead <= maxDist {
			z.matchLength = z.longestMatch(hashHead)
			if z.matchLength <= 5 && z.matchLength == minMatch && z.strstart-z.matchStart > tooFar {
				z.matchLength = minMatch - 1
			}
		}
		if z.prevLength >= minMatch && z.matchLength <= z.prevLength {
			maxInsert := z.strstart + z.lookahead - minMatch
			bflush := z.tallyDist(z.strstart-1-z.prevMatch, z.prevLength-minMatch)
			z.lookahead -= z.prevLength - 1
			z.prevLength -= 2
			for {
				z.strstart++
				if z.strstart <= maxInsert {
					z.insertString(z.strstart)
				}
				z.prevLength--
				if z.prevLength == 0 {
					break
				}
			}
			z.matchAvailable = false
			z.matchLength = minMatch - 1
			z.strstart++
			if bflush {
				z.flushBlock(false)
			}
		} else if z.matchAvailable {
			if z.tallyLit(z.window[z.strstart-1]) {
				z.flushBlock(false)
			}
			z.strstart++
			z.lookahead--
		} else {
			z.matchAvailable = true
			z.strstart++
			z.lookahead--
		}
	}
	if z.matchAvailable {
		z.tallyLit(z.window[z.strstart-1])
		z.matchAvailable = false
	}
	z.insert = min(z.strstart, minMatch-1)
	if finish {
		z.flushBlock(true)
		return
	}
	if z.symNext != 0 {
		z.flushBlock(false)
	}
}
