// Package storage is a node's one badger instance and what serves it as a
// whole: the options it is opened with (sized from the memory budget, every
// commit synced), the disk accounting that attributes the shared files to
// shards (Disk), the reclamation of garbage (LSM merge, unreferenced
// value-log files, value-log GC; one at a time per node), the warming of
// value-log files before GC reads them, the low-priority threads of
// background work, and the trimmer that keeps the value log out of
// resident memory. It knows nothing of documents, shards or databases:
// shard keys its records in the DB under its own prefix. See DESIGN.md.
package storage
