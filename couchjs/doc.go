// Package couchjs runs CouchDB design-document JavaScript (map, reduce,
// validate_doc_update, filters, shows, lists, updates) in process on goja,
// behaving as CouchDB 3.5.2's couchjs (share/server/*.js over SpiderMonkey)
// does: the same sandbox names (emit, sum, log, toJSON, isArray, require,
// provides, registerType, start, send, getRow), the same error answers, the
// same treatment of a function that throws.
//
// Sandboxes. A Pool runs at most Config.MaxVMs calls at once, each on a
// goja runtime checked out for the call. A runtime belongs for life to
// one sandbox: Pool.DDoc(db, ddocJSON) is a design doc's (keyed by the
// database and a SHA-256 of the doc's bytes, so a new revision is a new
// sandbox; its validate_doc_update, filters, shows, lists, updates and
// rewrites run there with the doc as `this`), Pool.Sandbox(name...) one a
// caller names (views: database, "views", index signature, for an
// index's maps and reduces). A call takes an idle runtime of its sandbox
// or makes one (about 0.3 ms: the prelude); between calls at most
// Config.MaxIdle runtimes are kept, the least recently used dropped
// first. The Pool methods of the DDoc names run in a one-off runtime.
//
// Why: goja has one set of built-ins per runtime and no way to reset
// them, and CouchDB lets a design doc change its own (couchjs gives each
// function its own global, SpiderMonkey's evalcx). With runtimes shared,
// a map function in one database that set Array.prototype.indexOf made
// another database's validate_doc_update accept docs it forbids.
// Freezing the built-ins of a shared runtime would break design docs that
// add to their own prototypes and still leave the global shared. So
// nothing one design doc's code does to built-ins or globals reaches
// another's, and within a sandbox it lasts between calls, as in a couchjs
// process.
//
// Runtime code evaluation is refused as couchjs refuses it (its
// SpiderMonkey has a content security policy allowing no eval):
// lockdown.js, run in every runtime before any design-doc code, replaces
// eval, Function, and the constructor of the Function, GeneratorFunction
// and AsyncFunction prototypes with functions throwing
// EvalError("call to eval() blocked by CSP") or ("call to Function()
// blocked by CSP"); the real constructors are unreachable after. Settee
// needs neither: function sources and modules are compiled in Go
// (goja.Compile, once per Pool; a *goja.Program is shared by every
// runtime) and made into function values once per runtime. require
// resolves modules in a frozen private copy of the design doc, own
// members only, so code cannot make it run a string of its own making.
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
// Differences from couchjs that remain: the functions of one sandbox
// share its built-ins and global (a design doc's show sees what its
// validate_doc_update did to Array.prototype; couchjs gives each function
// its own global via evalcx), and an index's map functions and reduces
// share theirs; top-level var and function declarations of a source stay
// private to it, as in couchjs. Syntax error texts come from goja's
// parser in the shape couchjs gives esprima's; the message after
// "Line N:" can differ. The reduce_limit check (reduce output must
// shrink) is not applied here.
package couchjs
