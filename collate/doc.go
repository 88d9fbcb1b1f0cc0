// Package collate is CouchDB's view collation of JSON values: Compare
// orders two JSON texts as couch_ejson_compare does, and AppendKey
// encodes one as bytes whose bytes.Compare order is that order, so that
// an index can keep view rows in a badger key range and the coordinator
// can merge pages by comparing bytes.
//
// # The order
//
// null < false < true < numbers < strings < arrays < objects. Numbers
// compare by mathematical value, as Erlang compares the terms CouchDB's
// jiffy decodes: an integer literal is exact (a bignum when large, so
// 12345678901234567891 > 12345678901234567890 even though no double tells
// them apart), any other literal is the double strtod rounds it to; 1 ==
// 1.0 and -0 == 0. (Keys emitted by a JavaScript map function are doubles
// before CouchDB sees them; startkey and Mango keys are not.) Strings
// compare by the Unicode Collation Algorithm with the CLDR root collation
// at its defaults, which is ICU's ucol_open("") as couch_ejson_compare
// uses it: tertiary strength (so "a" < "A" < "aa" < "b": letters first,
// then accents, then case, lower first), punctuation and spaces not
// ignorable, control characters ignorable. Strings equal at all three
// levels compare 0 even when their bytes differ ("a" and "a\u0001"):
// ucol_strcollIter says 0 and CouchDB falls back to nothing but the doc
// id, so the index must put such keys' rows in doc id order too. Arrays
// compare element by element, a prefix first; objects pair by pair in
// their order (key by collation, then value), a prefix first.
//
// Strings use golang.org/x/text/collate, whose tables are CLDR 23 /
// Unicode 6.2, while CouchDB 3.5.2 links ICU 72 (CLDR 42 / Unicode 15):
// characters assigned after Unicode 6.2 (most emoji after 😀, new CJK
// extensions) have no weight in x/text and sort by code point after every
// assigned character, where ICU gives them their place among the symbols
// or letters. TestCouchDBOrder pins the keys on which they agree.
//
// # The encoding
//
// One tag byte per value, in type order, then:
//
//	null 0x02, false 0x03, true 0x04
//	number   0x10 (negative), 0x11 (zero, nothing follows), 0x12 (positive)
//	         then, for ±1.f × 2^E: E+0x8000 as 2 bytes big-endian (0xFFFF and
//	         E as 8 bytes when E ≥ 0x7FFF: only integers of 2^32767 and more,
//	         or infinity), then f's bits in 7-bit groups, one to a byte as
//	         group<<1|more, the last group non-zero (a power of two: one 0
//	         byte); a negative number's bytes after the tag are inverted
//	string   0x20, the x/text collation sort key (primary, secondary and
//	         tertiary weights) with each 0x00 written 0x00 0xFF, then 0x00 0x01
//	array    0x30, the elements, 0x00
//	object   0x40, key (as a string) and value for each member, 0x00
//
// Binary exponent and fraction rather than float64 bits because integers
// are exact here: one form serves doubles and bignums, and 1 and 1.0 get
// the same bytes. Every value's encoding is self-delimiting (the fraction
// by its more bits, the string by 0x00 0x01, containers by 0x00) and no
// encoding is a prefix of another's, so a doc id can follow a key and the
// comparison never reads past a value unless the values are equal. The
// end byte 0x00 is below every tag, so ["a"] < ["a",1] < ["b"]: an array's
// encoding without its last byte is a prefix of every longer array's with
// the same first elements, which is what group_level and startkey=[x]
// ranges need (AppendArrayPrefix builds the group key of the first N
// elements). The encoding depends on the collation tables: an index built
// with one version of x/text must be rebuilt when they change.
package collate

// TablesVersion names the collation tables the string order comes from
// (what a view index's _info shows as its collator version).
const TablesVersion = "x/text CLDR 23"
