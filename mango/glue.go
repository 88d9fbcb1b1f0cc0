package mango

// Plain is v with every Object made a map (encoding/json's form), what
// Compile and Plan take: a normalized selector's member order means
// nothing to them.
func Plain(v any) any { return plain(v) }

// FieldPath is a field name's path: its dotted parts, "\." an escaped
// dot.
func FieldPath(field string) []string { return splitField(field) }
