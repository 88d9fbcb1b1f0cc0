// Package revtree implements CouchDB's document revision trees over the flat
// pb.FullDocInfo.Nodes representation: rev parsing, winner and conflicts,
// merging rev paths, _revs_limit stemming and settee's deterministic rev hash.
package revtree
