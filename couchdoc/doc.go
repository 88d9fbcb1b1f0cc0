// Package couchdoc renders stored revisions as CouchDB documents: the
// stored body bytes spliced between _id/_rev and the members a read asks
// for (_revisions, _revs_info, _conflicts, _attachments with stubs or
// inline data). The HTTP gateway and the replicator's local endpoint both
// render through it, so they cannot drift apart.
package couchdoc
