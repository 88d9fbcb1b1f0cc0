// Package couchjs runs CouchDB design-document JavaScript (map, reduce,
// validate_doc_update, filters, shows, lists, updates) in process on goja,
// behaving as CouchDB 3.5.2's couchjs (share/server/*.js over SpiderMonkey)
// does: the same sandbox names (emit, sum, log, toJSON, isArray, require,
// provides, registerType, start, send, getRow), the same error answers, the
// same treatment of a function that throws.
//
// A Pool holds at most Config.MaxVMs goja runtimes; a call checks one out
// (waiting, ctx-aware, when all are busy) and gives it back. Function
// sources are parsed and compiled once per Pool (*goja.Program, shared by
// every runtime) and turned into function values once per runtime.
//
// Bounds. Every call runs under a watchdog goroutine owned by the call: at
// Config.Timeout it interrupts the runtime (vm.Interrupt) and the call
// answers CouchDB's {"error":"os_process_error","reason":"OS process timed
// out."}. goja cannot account memory per runtime, so Config.MaxMemory is
// enforced approximately: the watchdog samples the process's live heap
// (runtime/metrics, no stop-the-world) every few milliseconds and
// interrupts the call when the heap has grown by more than MaxMemory since
// the call began. That bounds a runaway allocation loop to about MaxMemory
// plus what it allocates in one sampling interval; it cannot tell this
// call's growth from a concurrent one's. An interrupted runtime is
// discarded, never reused: the function may have left anything in it.
// Deep recursion is bounded by goja's call-stack limit and answered as a
// RangeError thrown in the function.
//
// Documents handed to map functions are lazy, read-only views over their
// JSON bytes (see lazydoc.go): a map reading two fields of a large doc
// decodes about two fields. CouchDB deep-freezes the doc before mapping;
// the views are likewise unwritable (assignment ignored in sloppy code, a
// TypeError in strict code and for push and friends).
//
// Differences from couchjs that remain: every function of one runtime
// shares that runtime's built-ins (a function that patches
// Array.prototype affects others in the same runtime; couchjs gives each
// function its own global via evalcx); top-level var and function
// declarations of a source stay private to it, as in couchjs. Syntax error
// texts come from goja's parser in the shape couchjs gives esprima's; the
// message after "Line N:" can differ. The reduce_limit check (reduce
// output must shrink) is not applied here.
package couchjs
