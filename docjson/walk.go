package docjson

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// The package has two ways over JSON bytes, on purpose:
//
//   - the scanner (scan.go) validates: it is what stands between a client's
//     bytes and the database (Valid, Compact, ParseDoc, ParseBulkDocs,
//     Unquote), so it checks every byte, UTF-8 and escapes included;
//   - the walker below trusts: it delimits values in bytes that were
//     validated already or that a CouchDB-compatible server wrote (a stored
//     body, a _bulk_get or _changes answer), where checking every byte again
//     would cost more than the work itself. It still stops on anything it
//     cannot delimit, with -1 or false, without reading out of bounds or
//     looping, so that hostile bytes cost a fallback to encoding/json, not a
//     panic. A value it accepts is not thereby valid JSON.
//
// Both skip white space with SkipWS.

// SkipWS returns the index of the first byte at or after i that is not JSON
// white space, len(b) when there is none.
func SkipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// SkipString returns the end (the index after the closing quote) of the
// string token at b[i] == '"', or -1 when it is not closed. The content is
// not checked. The closing quote is found with bytes.IndexByte, so a
// document with megabytes of base64 costs a memchr, not a byte-by-byte
// state machine.
func SkipString(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		// the quote ends the string unless an odd run of backslashes
		// escapes it
		e := j + k
		n := 0
		for e-1-n > i && b[e-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return e + 1
		}
		j = e + 1
	}
}

// SkipValue returns the end of the JSON value at b[i] (no white space
// before it), or -1. Strings are delimited as by SkipString; objects and
// arrays by counting brackets outside strings (which bracket closes which
// is not checked); scalars run to the next ',', '}', ']' or white space and
// are not validated: the JSON came from a server that wrote it, and a bad
// one fails where it is parsed.
func SkipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		run := 0 // bytes in a row that are not structural
		for j := i; j < len(b); j++ {
			c := b[j]
			if !structuralByte[c] {
				// A long run (the numbers of an array) goes 8 bytes at a
				// time; a short one, as between the strings of a _changes
				// row, costs less a byte at a time than the setup would.
				if run++; run == 8 {
					run = 0
					for j+9 <= len(b) {
						m := structural(binary.LittleEndian.Uint64(b[j+1:])) & msb
						if m != 0 {
							j += bits.TrailingZeros64(m) >> 3
							break
						}
						j += 8
					}
				}
				continue
			}
			run = 0
			switch c {
			case '"':
				e := SkipString(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			default: // '}', ']'
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\n', '\r', '\t':
			if j == i {
				return -1
			}
			return j
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// structuralByte marks the bytes SkipValue stops at inside a container.
var structuralByte = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// structural returns a mask with the high bit set in the lowest byte of x
// (as little-endian) that is '"', '{', '}', '[' or ']'; higher bytes may be
// flagged spuriously, the lowest flagged byte is exact (as in special).
// Setting bit 5 folds '[' onto '{' and ']' onto '}', and no other byte onto
// either.
func structural(x uint64) uint64 {
	q := x ^ (lsb * '"')
	y := x | (lsb * 0x20)
	o := y ^ (lsb * '{')
	c := y ^ (lsb * '}')
	return ((q - lsb) &^ q) | ((o - lsb) &^ o) | ((c - lsb) &^ c)
}

// Object walks the members of the JSON object at b[i] (after white space):
// for each it calls f with the raw key token (quotes and escapes included)
// and the start vs of the value; f reads the value itself and returns where
// it ends, or -1 to stop. A value is so scanned once, by the caller, not
// once to delimit it and again to read it; a caller with nothing to read
// returns SkipValue(b, vs). Object returns the end of the object, or -1
// when f stops or the object is malformed (keys are delimited as by
// SkipString, not checked).
func Object(b []byte, i int, f func(key []byte, vs int) int) int {
	i = SkipWS(b, i)
	if i >= len(b) || b[i] != '{' {
		return -1
	}
	i = SkipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for i < len(b) {
		if b[i] != '"' {
			return -1
		}
		ke := SkipString(b, i)
		if ke < 0 {
			return -1
		}
		j := SkipWS(b, ke)
		if j >= len(b) || b[j] != ':' {
			return -1
		}
		ve := f(b[i:ke], SkipWS(b, j+1))
		if ve < 0 {
			return -1
		}
		if i = SkipWS(b, ve); i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = SkipWS(b, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
	return -1
}

// Array is Object for the elements of the JSON array at b[i]: f gets the
// start of each element and returns its end, or -1 to stop.
func Array(b []byte, i int, f func(vs int) int) int {
	i = SkipWS(b, i)
	if i >= len(b) || b[i] != '[' {
		return -1
	}
	i = SkipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1
	}
	for i < len(b) {
		ve := f(i)
		if ve < 0 {
			return -1
		}
		if i = SkipWS(b, ve); i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = SkipWS(b, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
	return -1
}
