// Package couchjs runs CouchDB design-document JavaScript (map, reduce,
// validate_doc_update, filters, shows, lists, updates) on goja in worker
// processes, behaving as CouchDB 3.5.2's couchjs (share/server/*.js over
// SpiderMonkey) does: the same sandbox names (emit, sum, log, toJSON,
// isArray, require, provides, registerType, start, send, getRow), the
// same error answers, the same treatment of a function that throws.
// DESIGN.md says why the JavaScript left the node's process, what
// bounds it, and what it costs.
//
// Workers. A Pool starts at most Config.MaxWorkers worker processes
// (CouchDB's os_process_limit), on demand, and keeps them. A worker is
// the same binary run again (os.Executable) with SETTEE_COUCHJS_WORKER=1:
// this package's init sees the variable, serves calls on stdin and
// stdout, and exits, before main runs. So cmd/settee and every test
// binary that starts a node in process is its own worker, with nothing
// to install or keep in step. That one init-time check is acceptable: a
// getenv, no flag parsing, no side effect when the variable is unset;
// and it has to run before main, which a library cannot hook otherwise.
// Calls are length-prefixed frames (wire.go); a view batch's docs go
// through a shared memory region, other arguments through the pipe, and
// doc bytes are never decoded on the way. A worker runs one call at a
// time; a list asks the parent for rows and sends it chunks within its
// call. The groups of a grouped reduce query go in one call
// (DDoc.ReduceBatch): a round trip per group made group=true 1.8x slower
// than in process.
//
// Bounds. A worker limits its own address space (RLIMIT_AS, its start
// size plus twice Config.WorkerMemory; not under the race detector) and
// its Go memory limit; the parent reads each busy worker's resident
// memory every 10 ms and kills it past WorkerMemory, and kills a worker
// that has not answered Config.Timeout plus a second after its last sign
// of progress. A call whose worker dies answers CouchDB's answer for a
// couchjs that died, {"error":"os_process_error","reason":
// "{exit_status,N}"} (a timeout: "OS process timed out."), the worker is
// replaced, and nothing else notices. Within a worker the call's own
// watchdog interrupts it at Timeout (per doc of a map batch, per group
// of a reduce batch) and when its heap grew by Config.MaxMemory (a
// gentler stop: the worker lives), and when its caller's ctx ends. repeat, padStart and padEnd past
// SpiderMonkey's longest string (2^30-2) throw its RangeError, as in
// couchjs, before allocating.
//
// Fair sharing. Calls wait per database (the db of DDoc, the first name
// of Sandbox; the Pool's one-off methods are a class of their own) and
// are served in turn across databases; one database holds at most
// Config.MaxWorkersPerDB workers at once, so a design doc whose
// functions loop delays its own database's calls and no other's.
//
// Sandboxes. A runtime belongs for life to one sandbox: Pool.DDoc(db,
// ddocJSON) is a design doc's (keyed by the database and a SHA-256 of the
// doc's bytes, so a new revision is a new sandbox; its
// validate_doc_update, filters, shows, lists, updates and rewrites run
// there with the doc as `this`), Pool.Sandbox(name...) one a caller
// names (views: database, "views", index signature, for an index's maps
// and reduces). Each worker keeps at most one runtime per sandbox (it
// runs one call at a time) and at most Config.MaxIdle in all, the least
// recently used dropped first; the parent routes a call to a free worker
// that holds its sandbox's runtime when there is one, and sends the
// design doc's bytes only to a worker that does not. A new runtime costs
// about 0.3 ms (the prelude). The Pool methods of the DDoc names run in
// a one-off runtime. Compiled programs are cached per worker.
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
// (goja.Compile, once per worker; a *goja.Program is shared by the
// worker's runtimes) and made into function values once per runtime.
// require resolves modules in a frozen private copy of the design doc,
// own members only, so code cannot make it run a string of its own
// making.
//
// Documents handed to map functions are lazy, read-only views over their
// JSON bytes (see lazydoc.go): a map reading two fields of a large doc
// decodes about two fields. CouchDB deep-freezes the doc before mapping;
// the views are likewise unwritable (assignment ignored in sloppy code, a
// TypeError in strict code and for push and friends). Their bytes are
// the call's: a doc a function keeps in a global past its call answers
// only the members it had read by then.
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
