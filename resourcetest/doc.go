// Package resourcetest is the resource suite: hostile requests that once
// took a settee node down or past its memory (issue 35), sent to a real
// settee process built from this checkout, each asserting what a user of
// the node would see: the process stays up, GET /_up and a plain document
// GET answer within a second throughout, and the process's resident
// memory stays under the node's budget plus 256 MB.
//
// The node runs in a process of its own (not in the test's), so that a
// case that kills it, or swells it, is seen as exactly that. It is built
// without the race detector: its memory is what is measured.
package resourcetest
