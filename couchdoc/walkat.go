package couchdoc

// ObjectAt walks the JSON object at b[i] (after white space) as WalkObject
// does, except that f parses each value itself, from its start vs, and
// returns where it ends (-1 to stop): a value is scanned once, by the
// caller, instead of once to delimit it and again to read it. ObjectAt
// returns the end of the object, or -1 when f stops or the object is
// malformed.
func ObjectAt(b []byte, i int, f func(key []byte, vs int) int) int {
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '{' {
		return -1
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for i < len(b) {
		if b[i] != '"' {
			return -1
		}
		ke := skipString(b, i)
		if ke < 0 {
			return -1
		}
		j := skipWS(b, ke)
		if j >= len(b) || b[j] != ':' {
			return -1
		}
		ve := f(b[i:ke], skipWS(b, j+1))
		if ve < 0 {
			return -1
		}
		if i = skipWS(b, ve); i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
	return -1
}

// ArrayAt is ObjectAt for the elements of the JSON array at b[i].
func ArrayAt(b []byte, i int, f func(vs int) int) int {
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '[' {
		return -1
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1
	}
	for i < len(b) {
		ve := f(i)
		if ve < 0 {
			return -1
		}
		if i = skipWS(b, ve); i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
	return -1
}

// SkipValue returns the end of the JSON value at b[i], or -1 (scalars
// delimited, not validated, as in WalkObject).
func SkipValue(b []byte, i int) int { return skipValue(b, i) }
