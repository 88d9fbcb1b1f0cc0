// Package admin is settee's cluster admin CLI (settee admin ...): commands
// that drive a node's HTTP API and print readable tables, or JSON with
// --json, and exit non-zero with a one-line error on failure.
package admin
