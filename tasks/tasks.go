// Package tasks is the node's registry of long-running work shown by
// GET /_active_tasks: database compactions, replications, indexers. Each
// task is a JSON object in CouchDB's shape; the registry only stores and
// lists them.
package tasks

import (
	"encoding/json"
	"maps"
	"sort"
	"sync"
	"time"
)

// Registry holds the active tasks of one node. Its zero value is not
// usable; call New.
type Registry struct {
	mu    sync.Mutex
	next  uint64
	tasks map[uint64]*Task
	node  string
}

// New returns an empty registry for the named node.
func New(node string) *Registry {
	return &Registry{tasks: map[uint64]*Task{}, node: node}
}

// Task is one registered task. Its fields follow CouchDB's _active_tasks
// entries: "type" plus type-specific members (database, progress,
// changes_done, total_changes, docs_read, ...).
type Task struct {
	r      *Registry
	id     uint64
	fields map[string]any
}

// Start registers a task of the given type ("database_compaction",
// "replication", ...) with its initial fields and returns it. The caller
// must call Done when the task ends.
func (r *Registry) Start(typ string, fields map[string]any) *Task {
	now := time.Now().Unix()
	f := map[string]any{"type": typ, "node": r.node, "pid": "", "started_on": now, "updated_on": now}
	maps.Copy(f, fields)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	t := &Task{r: r, id: r.next, fields: f}
	f["pid"] = "<0." + itoa(t.id) + ".0>"
	r.tasks[t.id] = t
	return t
}

// Update merges fields into the task and bumps updated_on.
func (t *Task) Update(fields map[string]any) {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	maps.Copy(t.fields, fields)
	t.fields["updated_on"] = time.Now().Unix()
}

// Done removes the task from the registry.
func (t *Task) Done() {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	delete(t.r.tasks, t.id)
}

// List returns a snapshot of every task, oldest first.
func (r *Registry) List() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]uint64, 0, len(r.tasks))
	for id := range r.tasks {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]map[string]any, len(ids))
	for i, id := range ids {
		out[i] = maps.Clone(r.tasks[id].fields)
	}
	return out
}

// Find returns the tasks of a type whose field key equals value (e.g. a
// running compaction of one database).
func (r *Registry) Find(typ, key string, value any) []map[string]any {
	var out []map[string]any
	for _, t := range r.List() {
		if t["type"] == typ && t[key] == value {
			out = append(out, t)
		}
	}
	return out
}

// MarshalJSON renders the list as GET /_active_tasks answers it.
func (r *Registry) MarshalJSON() ([]byte, error) { return json.Marshal(r.List()) }

func itoa(n uint64) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
