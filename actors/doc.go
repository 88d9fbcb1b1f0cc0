// Package actors is settee's thin layer over protoactor-go: context-aware
// requests with typed replies, and the error mapping for futures. It knows
// nothing about documents.
package actors
