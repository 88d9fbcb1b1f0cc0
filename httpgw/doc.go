// Package httpgw is CouchDB's HTTP API in front of the coordinator: routing,
// authentication and database security, JSON in and out (bodies stay bytes),
// streamed rows, and the one table that maps errors to CouchDB's
// {"error","reason"} answers. It never touches shards directly.
package httpgw
