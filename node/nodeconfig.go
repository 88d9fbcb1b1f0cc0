package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/couchjs"
	"github.com/settee/settee/rights"
	"github.com/settee/settee/smoosh"
	"github.com/settee/settee/storage"
)

// The node's _config (/_node/{name|_local}/_config): CouchDB's sections of
// string keys and values. Three layers, as CouchDB's ini files
// (default.ini < local.ini, where _config writes go):
//
//   - built-in defaults and the serve flags: the start values;
//   - values written through _config, persisted under node keys
//     <0000>'C'<section>/<key> and read back at every start, which win
//     over the start values (a _config write survives a restart, as one
//     written to local.ini does; the flag is then the fallback a DELETE
//     goes back to);
//   - the admins section, whose start admin (--admin, or the generated
//     one) is kept under node key 'A' and set by the flag at every start.
//
// Keys settee honours are validated on write (a value that does not parse
// is refused and nothing changes) and most take effect at once; unknown
// sections and keys are stored and answered as they are.

var (
	// ErrConfigNotFound is the answer for a key that has no value.
	ErrConfigNotFound = errors.New("node: unknown config value")
	// ErrConfigForbidden is the answer for a write to a section CouchDB
	// does not let change over HTTP.
	ErrConfigForbidden = errors.New("node: config section blacklisted for modification over HTTP API")
	// ErrConfigBadValue is the answer for a value a key settee honours
	// cannot take (the error says which and why).
	ErrConfigBadValue = errors.New("node: bad config value")
)

// blacklisted are the sections CouchDB 3.5 refuses to change over HTTP
// (couch_httpd_misc_handlers / chttpd_node: 403 forbidden).
var blacklisted = map[string]bool{
	"daemons": true, "external": true, "httpd_design_handlers": true, "httpd_db_handlers": true,
	"httpd_global_handlers": true, "native_query_servers": true, "os_daemons": true, "query_servers": true,
}

// setteeSection holds the serve flags CouchDB has no key for.
const setteeSection = "settee"

// fixed are the keys only their flag sets: the store they would be kept
// in is opened by them (the data dir, the memory budget), or they are the
// address other members know the node by.
var fixed = map[string]string{
	"couchdb/database_dir":  "--data-dir",
	"settee/memory_mb":      "--memory-mb",
	"settee/node_addr":      "--node-addr",
	"settee/advertise_addr": "--advertise-addr",
}

func fixedKey(section, key string) error {
	if flag, ok := fixed[section+"/"+key]; ok {
		return fmt.Errorf("%w: %s/%s is set by the %s flag at start only", ErrConfigBadValue, section, key, flag)
	}
	return nil
}

// adminsSection is the server admins: name = password hash.
const adminsSection = "admins"

// knownKey is a key settee honours: check parses a value (nil: any), apply
// makes it take effect (nil: read at start only).
type knownKey struct {
	check func(v string) error
	apply func(v string)
}

// nodeConfig is the node's _config.
type nodeConfig struct {
	n *Node

	mu    sync.Mutex
	start map[string]map[string]string // defaults and flags
	// unlisted holds the defaults CouchDB's default.ini leaves commented
	// out: they are in force, but CouchDB's _config does not list them
	// (GET of one is 404 unknown_config_value), and neither does settee's
	unlisted map[string]map[string]string
	stored   map[string]map[string]string // written through _config
	known    map[string]knownKey          // "section/key"

	// the live settings
	maxDoc, maxAtt atomic.Int64
	maxPartition   atomic.Int64 // couchdb/max_partition_size (<= 0: no limit)
	q, copies      atomic.Int64
	requireUser    atomic.Bool
	requireNotUp   atomic.Bool
	admins         atomic.Pointer[map[string]*auth.Credential]
	requestTimeout atomic.Int64 // settee/request_timeout
	// the limits that keep one client from taking the node (httpgw's
	// limits.go, the connection cap in node.go)
	maxRequest, maxRequestMem atomic.Int64 // bytes
	ioTimeout                 atomic.Int64 // settee/io_timeout
	maxConns                  atomic.Int64 // settee/max_connections
	noViewRefresh             atomic.Bool  // settee/view_background_refresh false
	// gen counts writes, so readers can cache what they parse from a
	// section (the gateway's CORS, auth and JWT settings) and parse again
	// only after a change
	gen atomic.Uint64
}

func setIn(m map[string]map[string]string, section, key, v string) {
	if m[section] == nil {
		m[section] = map[string]string{}
	}
	m[section][key] = v
}

// loadConfig builds the config from the start values and what is stored;
// it runs before the admin is loaded and the daemons start.
func (n *Node) loadConfig() error {
	c := &nodeConfig{n: n, start: map[string]map[string]string{}, stored: map[string]map[string]string{}, unlisted: map[string]map[string]string{}}
	n.conf = c
	cfg := n.cfg
	st := func(s, k, v string) { setIn(c.start, s, k, v) }
	// a flag that keeps CouchDB's default leaves the key unlisted
	stOrUnlisted := func(s, k, v, couchDefault string) {
		if v == couchDefault {
			setIn(c.unlisted, s, k, v)
			return
		}
		st(s, k, v)
	}
	stOrUnlisted("couchdb", "max_document_size", strconv.FormatInt(cfg.MaxDocumentSize, 10), "8000000")
	maxAtt := "infinity"
	if cfg.MaxAttachmentSize > 0 {
		maxAtt = strconv.FormatInt(cfg.MaxAttachmentSize, 10)
	}
	stOrUnlisted("couchdb", "max_attachment_size", maxAtt, "infinity")
	st("cluster", "q", strconv.Itoa(cfg.Q))
	st("cluster", "n", strconv.Itoa(cfg.N))
	setIn(c.unlisted, "couchdb", "max_partition_size", "10737418240")
	// design-doc JavaScript (couchjs worker processes), read at start:
	// CouchDB lists none of them; its os_process_limit is 100 couchjs
	// processes, settee's default is couchjs's (2 per core, at least 2)
	setIn(c.unlisted, "couchdb", "os_process_timeout", "5000")
	setIn(c.unlisted, "query_server_config", "os_process_limit", strconv.Itoa(max(2, 2*runtime.GOMAXPROCS(0))))
	setIn(c.unlisted, setteeSection, "js_workers_per_db", "0")
	setIn(c.unlisted, setteeSection, "js_worker_memory_mb", "512")
	setIn(c.unlisted, "chttpd", "require_valid_user", "false")
	setIn(c.unlisted, "chttpd", "require_valid_user_except_for_up", "false")
	st("log", "level", "info")
	if cfg.LogLevel != nil {
		st("log", "level", levelName(cfg.LogLevel.Level()))
	}
	st("replicator", "max_jobs", strconv.Itoa(cmpOr(cfg.ReplicatorMaxJobs, 500)))
	st("replicator", "max_churn", strconv.Itoa(cmpOr(cfg.ReplicatorMaxChurn, 20)))
	st("replicator", "interval", strconv.FormatInt(cmpOr(cfg.ReplicatorInterval, time.Minute).Milliseconds(), 10))
	st("replicator", "connection_timeout", strconv.FormatInt(cmpOr(cfg.ReplicatorConnectionTimeout, 30*time.Second).Milliseconds(), 10))
	for k, v := range smoosh.Defaults {
		st(smoosh.Section, k, v)
	}
	// the serve flags CouchDB has no key for, under settee's own section
	st("couchdb", "database_dir", cfg.DataDir)
	st(setteeSection, "memory_mb", strconv.Itoa(cfg.MemoryMB))
	st(setteeSection, "request_timeout", cfg.RequestTimeout.String())
	st(setteeSection, "view_background_refresh", "true")
	stOrUnlisted("chttpd", "max_http_request_size", strconv.FormatInt(cfg.MaxRequestSize, 10), "4294967296")
	st(setteeSection, "max_request_memory_mb", strconv.Itoa(cmpOr(cfg.MaxRequestMemoryMB, max(64, cfg.MemoryMB/2))))
	st(setteeSection, "io_timeout", cmpOr(cfg.IOTimeout, DefaultIOTimeout).String())
	st(setteeSection, "max_connections", strconv.Itoa(cmpOr(cfg.MaxConnections, DefaultMaxConnections)))
	st(setteeSection, "heartbeat_interval", cmpOr(cfg.HeartbeatInterval, DefaultHeartbeatInterval).String())
	st(setteeSection, "node_down_after", cmpOr(cfg.NodeDownAfter, DefaultNodeDownAfter).String())
	st(setteeSection, "node_addr", cfg.Cluster.NodeAddr)
	st(setteeSection, "advertise_addr", cfg.Cluster.AdvertiseAddr)
	addrStartValues(cfg, st)

	posInt := func(min, max int64) func(string) error {
		return func(v string) error {
			i, err := strconv.ParseInt(v, 10, 64)
			if err != nil || i < min || i > max {
				return fmt.Errorf("want an integer from %d to %d", min, max)
			}
			return nil
		}
	}
	anyInt := func(v string) error {
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return errors.New("want an integer")
		}
		return nil
	}
	boolean := func(v string) error {
		if v != "true" && v != "false" {
			return errors.New("want true or false")
		}
		return nil
	}
	duration := func(v string) error {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return errors.New("want a duration such as 60s or 1m30s")
		}
		return nil
	}
	positiveDuration := func(v string) error {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return errors.New("want a positive duration such as 1s")
		}
		return nil
	}
	c.known = map[string]knownKey{
		"couchdb/max_document_size": {posInt(1, math.MaxInt64), func(v string) { c.maxDoc.Store(atoi64(v)) }},
		"couchdb/max_attachment_size": {func(v string) error {
			if v == "infinity" {
				return nil
			}
			return posInt(0, math.MaxInt64)(v)
		}, func(v string) {
			if v == "infinity" {
				c.maxAtt.Store(math.MaxInt64)
				return
			}
			c.maxAtt.Store(atoi64(v))
		}},
		// any integer, as CouchDB takes it: 0 or less turns the check off
		"couchdb/max_partition_size": {anyInt, func(v string) { c.maxPartition.Store(atoi64(v)) }},
		// read by partition queries (httpgw); "infinity" or an integer
		"query_server_config/partition_query_limit": {check: func(v string) error {
			if v == "infinity" {
				return nil
			}
			return anyInt(v)
		}},
		"chttpd/require_valid_user":               {boolean, func(v string) { c.requireUser.Store(v == "true") }},
		"chttpd/require_valid_user_except_for_up": {boolean, func(v string) { c.requireNotUp.Store(v == "true") }},
		"cluster/q": {posInt(1, 256), func(v string) { c.q.Store(atoi64(v)) }},
		"cluster/n": {posInt(1, 1000), func(v string) { c.copies.Store(atoi64(v)) }},
		"log/level": {func(v string) error {
			if _, ok := parseLevel(v); !ok {
				return errors.New("want debug, info, notice, warning, error, critical, alert, emergency or none")
			}
			return nil
		}, func(v string) {
			if l, ok := parseLevel(v); ok && cfg.LogLevel != nil {
				cfg.LogLevel.Set(l)
			}
		}},
		"couchdb/users_db_security_editable": {check: boolean},
		// read by _find at each query (httpgw/find.go); 0 or none: off
		"mango/max_docs_scanned":             {check: posInt(0, math.MaxInt32)},
		"mango/index_scan_warning_threshold": {check: posInt(0, math.MaxInt32)},
		// read by the views service's indexers at each refresh tick
		"settee/view_background_refresh": {boolean, func(v string) { c.noViewRefresh.Store(v == "false") }},
		"chttpd/max_http_request_size":   {posInt(1, math.MaxInt64), func(v string) { c.maxRequest.Store(atoi64(v)) }},
		"settee/max_request_memory_mb":   {posInt(1, 1<<30), func(v string) { c.maxRequestMem.Store(atoi64(v) << 20) }},
		"settee/max_connections":         {posInt(1, 1<<24), func(v string) { c.maxConns.Store(atoi64(v)) }},
		"settee/io_timeout": {positiveDuration, func(v string) {
			d, _ := time.ParseDuration(v)
			c.ioTimeout.Store(int64(d))
		}},
		"settee/request_timeout": {duration, func(v string) {
			d, _ := time.ParseDuration(v)
			c.requestTimeout.Store(int64(d))
		}},
		// read when the cluster starts
		"settee/heartbeat_interval":      {check: positiveDuration},
		"settee/node_down_after":         {check: positiveDuration},
		"chttpd/authentication_handlers": {check: func(v string) error { _, err := auth.ParseHandlers(v); return err }},
		// read by the gateway's CORS (httpgw/cors.go) at the next request;
		// CouchDB has no start values for them, nor has settee
		"chttpd/enable_cors": {check: boolean},
		"cors/credentials":   {check: boolean},
		"cors/max_age":       {check: posInt(0, math.MaxInt32)},
		// read when the node starts (couchjs.Config)
		"couchdb/os_process_timeout":           {check: posInt(1, math.MaxInt32)},
		"query_server_config/os_process_limit": {check: posInt(1, 1024)},
		"settee/js_workers_per_db":             {check: posInt(0, 1024)},
		"settee/js_worker_memory_mb":           {check: posInt(16, 1<<20)},
		// read when the replicator starts
		"replicator/max_jobs":           {check: posInt(1, math.MaxInt32)},
		"replicator/max_churn":          {check: posInt(1, math.MaxInt32)},
		"replicator/interval":           {check: posInt(1, math.MaxInt32)},
		"replicator/connection_timeout": {check: posInt(1, math.MaxInt32)},
	}
	maps.Copy(c.known, addrKeys(boolean, posInt(0, 65535)))

	// the gateway reads the auth settings (from chttpd_auth, else from
	// couch_httpd_auth, as CouchDB) after each write; they are checked here
	for _, sec := range []string{"chttpd_auth", "couch_httpd_auth"} {
		c.known[sec+"/timeout"] = knownKey{check: posInt(1, math.MaxInt32)}
		c.known[sec+"/iterations"] = knownKey{check: posInt(1, math.MaxInt32)}
		// the bounds of a stored hash's count at login (httpgw)
		c.known[sec+"/min_iterations"] = knownKey{check: posInt(1, math.MaxInt64)}
		c.known[sec+"/max_iterations"] = knownKey{check: posInt(1, math.MaxInt64)}
		c.known[sec+"/allow_persistent_cookies"] = knownKey{check: boolean}
		c.known[sec+"/require_valid_user"] = knownKey{check: boolean}
		c.known[sec+"/same_site"] = knownKey{check: func(v string) error {
			switch strings.ToLower(v) {
			case "", "none", "lax", "strict":
				return nil
			}
			return errors.New("want none, lax or strict")
		}}
	}

	prefix := keyConfig("", "")[:5]
	err := n.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			s, k := configKeyName(it.Item().Key())
			setIn(c.stored, s, k, string(v))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("node: load config: %w", err)
	}
	for name, kk := range c.known {
		s, k, _ := strings.Cut(name, "/")
		v, ok := c.stored[s][k]
		if ok && kk.check != nil && kk.check(v) != nil {
			n.log.Warn("config: stored value does not parse, using the start value", "section", s, "key", k, "value", v)
			ok = false
		}
		if !ok {
			v = c.startValue(s, k)
		} else if sv := c.startValue(s, k); sv != v {
			n.log.Info("config: stored value overrides the start value", "section", s, "key", k, "value", v, "start", sv)
		}
		if kk.apply != nil {
			kk.apply(v)
		}
	}
	return nil
}

func cmpOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

func atoi64(v string) int64 { i, _ := strconv.ParseInt(v, 10, 64); return i }

// value is a key's value as the daemons read it at start: the stored one
// when it parses, else the start value.
func (c *nodeConfig) value(section, key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.stored[section][key]; ok {
		if kk, known := c.known[section+"/"+key]; !known || kk.check == nil || kk.check(v) == nil {
			return v
		}
	}
	return c.startValue(section, key)
}

// startValue is what a key is when nothing is stored: its start value,
// else its unlisted default; c.mu held or not needed.
func (c *nodeConfig) startValue(section, key string) string {
	if v, ok := c.start[section][key]; ok {
		return v
	}
	return c.unlisted[section][key]
}

// jsConfig is couchjs's settings as the config has them at start.
func (c *nodeConfig) jsConfig(log *slog.Logger) couchjs.Config {
	return couchjs.Config{
		Timeout:         time.Duration(c.intValue("couchdb", "os_process_timeout")) * time.Millisecond,
		MaxWorkers:      c.intValue("query_server_config", "os_process_limit"),
		MaxWorkersPerDB: c.intValue(setteeSection, "js_workers_per_db"),
		WorkerMemory:    int64(c.intValue(setteeSection, "js_worker_memory_mb")) << 20,
		Logger:          log,
	}
}

func (c *nodeConfig) intValue(section, key string) int {
	i, _ := strconv.Atoi(c.value(section, key))
	return i
}

func parseLevel(v string) (slog.Level, bool) {
	switch v {
	case "debug":
		return slog.LevelDebug, true
	case "info", "notice":
		return slog.LevelInfo, true
	case "warning", "warn":
		return slog.LevelWarn, true
	case "error", "critical", "alert", "emergency":
		return slog.LevelError, true
	case "none":
		return slog.Level(math.MaxInt32), true
	}
	return 0, false
}

func levelName(l slog.Level) string {
	switch {
	case l <= slog.LevelDebug:
		return "debug"
	case l <= slog.LevelInfo:
		return "info"
	case l <= slog.LevelWarn:
		return "warning"
	case l <= slog.LevelError:
		return "error"
	}
	return "none"
}

// ConfigSections names the sections that have a key, sorted.
func (n *Node) ConfigSections() []string {
	c := n.conf
	c.mu.Lock()
	names := map[string]bool{adminsSection: true}
	for s := range c.start {
		names[s] = true
	}
	for s, kv := range c.stored {
		if len(kv) > 0 {
			names[s] = true
		}
	}
	c.mu.Unlock()
	return slices.Sorted(maps.Keys(names))
}

// ConfigSection is a section's keys and values; false when it has none.
func (n *Node) ConfigSection(section string) (map[string]string, bool) {
	c := n.conf
	out := map[string]string{}
	c.mu.Lock()
	maps.Copy(out, c.start[section])
	maps.Copy(out, c.stored[section])
	c.mu.Unlock()
	switch section {
	case smoosh.Section:
		if n.smoosh != nil {
			maps.Copy(out, n.smoosh.Settings())
		}
	case adminsSection:
		for name, cred := range n.serverAdmins() {
			out[name] = formatAdmin(cred)
		}
	}
	return out, len(out) > 0
}

// ConfigValue is one key's value.
func (n *Node) ConfigValue(section, key string) (string, error) {
	sec, _ := n.ConfigSection(section)
	v, ok := sec[key]
	if !ok {
		return "", ErrConfigNotFound
	}
	return v, nil
}

// SetConfig changes a key and returns its old value ("" when it had none).
// A plain password written to admins is stored hashed.
func (n *Node) SetConfig(section, key, value string) (string, error) {
	defer n.conf.gen.Add(1)
	if blacklisted[section] {
		return "", ErrConfigForbidden
	}
	if err := fixedKey(section, key); err != nil {
		return "", err
	}
	if section == adminsSection {
		return n.setAdmin(key, value)
	}
	c := n.conf
	kk, known := c.known[section+"/"+key]
	if known && kk.check != nil {
		if err := kk.check(value); err != nil {
			return "", fmt.Errorf("%w: %s/%s %q: %v", ErrConfigBadValue, section, key, value, err)
		}
	}
	old, _ := n.ConfigValue(section, key)
	if section == smoosh.Section && n.smoosh != nil {
		if _, ok := smoosh.Defaults[key]; ok {
			// smoosh checks and applies; the value is stored below
			if _, err := n.smoosh.Set(key, value); err != nil {
				return "", fmt.Errorf("%w: %v", ErrConfigBadValue, err)
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := storage.Update(n.db, func(txn *badger.Txn) error { return txn.Set(keyConfig(section, key), []byte(value)) }); err != nil {
		return "", err
	}
	setIn(c.stored, section, key, value)
	if known && kk.apply != nil {
		kk.apply(value)
	}
	return old, nil
}

// DeleteConfig removes a key and returns its old value; a key settee
// honours goes back to its start value (default or flag).
func (n *Node) DeleteConfig(section, key string) (string, error) {
	defer n.conf.gen.Add(1)
	if blacklisted[section] {
		return "", ErrConfigForbidden
	}
	if err := fixedKey(section, key); err != nil {
		return "", err
	}
	if section == adminsSection {
		return n.deleteAdmin(key)
	}
	old, err := n.ConfigValue(section, key)
	if err != nil {
		return "", err
	}
	c := n.conf
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := storage.Update(n.db, func(txn *badger.Txn) error { return txn.Delete(keyConfig(section, key)) }); err != nil {
		return "", err
	}
	delete(c.stored[section], key)
	startV, hasStart := c.start[section][key]
	if !hasStart {
		startV, hasStart = c.unlisted[section][key]
	}
	if kk, ok := c.known[section+"/"+key]; ok && kk.apply != nil && hasStart {
		kk.apply(startV)
	}
	if section == smoosh.Section && n.smoosh != nil {
		if d, ok := smoosh.Defaults[key]; ok {
			_, _ = n.smoosh.Set(key, d)
		}
	}
	return old, nil
}

// setStart changes a start value the node learns only once it listens
// (the port a port 0 picked).
func (c *nodeConfig) setStart(section, key, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	setIn(c.start, section, key, v)
}

// ConfigGeneration changes whenever a _config write or delete has been
// made: a reader that parsed a section may keep what it parsed until then.
func (n *Node) ConfigGeneration() uint64 { return n.conf.gen.Load() }

// ReloadConfig is POST _config/_reload: settee's config has no files to
// read again, so it answers ok with nothing changed.
func (n *Node) ReloadConfig() error { return nil }

// RequireValidUser is chttpd/require_valid_user and
// chttpd/require_valid_user_except_for_up.
func (n *Node) RequireValidUser() (all, exceptUp bool) {
	return n.conf.requireUser.Load(), n.conf.requireNotUp.Load()
}

// ViewBackgroundRefresh is settee/view_background_refresh: indexes
// queried lately are kept current after writes.
func (n *Node) ViewBackgroundRefresh() bool { return !n.conf.noViewRefresh.Load() }

// RequestTimeout is settee/request_timeout (0: none).
func (n *Node) RequestTimeout() time.Duration { return time.Duration(n.conf.requestTimeout.Load()) }

// MaxRequestSize is chttpd/max_http_request_size, in bytes.
func (n *Node) MaxRequestSize() int64 { return n.conf.maxRequest.Load() }

// MaxRequestMemory is settee/max_request_memory_mb in bytes: the request
// body bytes the node holds at once before it answers 503.
func (n *Node) MaxRequestMemory() int64 { return n.conf.maxRequestMem.Load() }

// IOTimeout is settee/io_timeout: the longest a request body's read or an
// answer's write waits for the client.
func (n *Node) IOTimeout() time.Duration { return time.Duration(n.conf.ioTimeout.Load()) }

// MaxConnections is settee/max_connections: past it a new connection is
// answered 503 and closed.
func (n *Node) MaxConnections() int { return int(n.conf.maxConns.Load()) }

// MaxDocumentSize is couchdb/max_document_size, in bytes.
func (n *Node) MaxDocumentSize() int64 { return n.conf.maxDoc.Load() }

// MaxPartitionSize is couchdb/max_partition_size in bytes (<= 0: no limit).
func (n *Node) MaxPartitionSize() int64 { return n.conf.maxPartition.Load() }

// MaxAttachmentSize is couchdb/max_attachment_size in bytes
// (math.MaxInt64 for "infinity").
func (n *Node) MaxAttachmentSize() int64 { return n.conf.maxAtt.Load() }

func (n *Node) defaultQ() int      { return int(n.conf.q.Load()) }
func (n *Node) defaultCopies() int { return int(n.conf.copies.Load()) }

// DefaultQ is cluster/q, the shard ranges of a new database.
func (n *Node) DefaultQ() int { return n.defaultQ() }

// --- admins ---

// ServerAdmin is the server admin of that name, nil when there is none.
func (n *Node) ServerAdmin(name string) *auth.Credential {
	return n.serverAdmins()[name]
}

func (n *Node) serverAdmins() map[string]*auth.Credential {
	if m := n.conf.admins.Load(); m != nil {
		return *m
	}
	return nil
}

// loadAdmins builds the admins from the start admin and the stored ones.
func (n *Node) loadAdmins(start *auth.Credential) {
	c := n.conf
	m := map[string]*auth.Credential{}
	for name, v := range c.stored[adminsSection] {
		if cred := parseAdmin(name, v); cred != nil {
			m[name] = cred
		} else {
			n.log.Warn("config: stored admin hash does not parse", "name", name)
		}
	}
	if start != nil {
		m[start.Name] = start
	}
	c.admins.Store(&m)
}

// adminHashPrefix is how CouchDB 3.5 writes an admin's PBKDF2-SHA256 hash:
// -pbkdf2:sha256-<derived key>,<salt>,<iterations>.
const adminHashPrefix = rights.AdminHashPrefix

func formatAdmin(c *auth.Credential) string {
	prefix := adminHashPrefix
	if c.PRF == "sha1" || c.PRF == "sha" {
		prefix = "-pbkdf2-"
	}
	return prefix + c.DerivedKey + "," + c.Salt + "," + strconv.Itoa(c.Iterations)
}

// parseAdmin reads a stored admin hash (rights.ParseConfigAdmin: CouchDB's
// -pbkdf2:sha256- and the older -pbkdf2- of SHA-1); nil when it is neither.
func parseAdmin(name, v string) *auth.Credential {
	c, ok := rights.ParseConfigAdmin(name, v)
	if !ok {
		return nil
	}
	return &auth.Credential{Name: c.Name, Scheme: c.Scheme, PRF: c.PRF, DerivedKey: c.DerivedKey, Salt: c.Salt, Iterations: c.Iterations}
}

// setAdmin adds or changes a server admin: a plain password is hashed (a
// value already hashed is kept as it is, as CouchDB does).
func (n *Node) setAdmin(name, value string) (string, error) {
	c := n.conf
	c.mu.Lock()
	defer c.mu.Unlock()
	admins := n.serverAdmins()
	old := ""
	if cur := admins[name]; cur != nil {
		old = formatAdmin(cur)
	} else if v, ok := c.stored[adminsSection][name]; ok {
		old = v
	}
	cred := parseAdmin(name, value)
	stored := value
	if cred == nil && !strings.HasPrefix(value, "-hashed-") {
		cred = auth.NewCredential(name, value, auth.DefaultIterations)
		stored = formatAdmin(cred)
	}
	err := storage.Update(n.db, func(txn *badger.Txn) error {
		if n.startAdmin != nil && name == n.startAdmin.Name && cred != nil {
			// the start admin is kept under 'A'
			b, err := json.Marshal(cred)
			if err != nil {
				return err
			}
			return txn.Set(keyAdmin, b)
		}
		return txn.Set(keyConfig(adminsSection, name), []byte(stored))
	})
	if err != nil {
		return "", err
	}
	if n.startAdmin == nil || name != n.startAdmin.Name || cred == nil {
		setIn(c.stored, adminsSection, name, stored)
	}
	m := maps.Clone(admins)
	if m == nil {
		m = map[string]*auth.Credential{}
	}
	if cred != nil {
		m[name] = cred
	} else {
		delete(m, name) // -hashed- (SHA-1 simple): stored, cannot log in
	}
	c.admins.Store(&m)
	return old, nil
}

func (n *Node) deleteAdmin(name string) (string, error) {
	c := n.conf
	c.mu.Lock()
	defer c.mu.Unlock()
	admins := n.serverAdmins()
	old, inStore := c.stored[adminsSection][name]
	if cur := admins[name]; cur != nil {
		old = formatAdmin(cur)
	} else if !inStore {
		return "", ErrConfigNotFound
	}
	err := storage.Update(n.db, func(txn *badger.Txn) error {
		if n.startAdmin != nil && name == n.startAdmin.Name {
			if err := txn.Delete(keyAdmin); err != nil {
				return err
			}
		}
		return txn.Delete(keyConfig(adminsSection, name))
	})
	if err != nil {
		return "", err
	}
	delete(c.stored[adminsSection], name)
	m := maps.Clone(admins)
	delete(m, name)
	c.admins.Store(&m)
	return old, nil
}
