package httpgw

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// lockout is CouchDB 3.5's chttpd_auth_lockout: failed logins are counted
// per client address, user name and the user's salt; once a count reaches
// the threshold, that client is refused for that user (403, even with the
// right password) until max_lifetime after its first failure. A new
// password (a new salt) starts a new count, as in CouchDB.
//
// A login that is to compute a password hash is counted when it starts
// (start), not when the hash says it failed: CouchDB counts after, so N
// attempts sent at once for one user all compute their hash (seconds each
// with a high iteration count) before the first is counted. Here the
// threshold bounds the hashes running at once too: the attempt after it
// is refused before it computes anything. An attempt that then succeeds
// takes its count back (release), so the count left is that of the
// failures, as CouchDB's; one whose client went away stays counted.
type lockout struct {
	mu    sync.Mutex
	fails map[lockKey]*lockEntry
	// n is len(fails): every basic-auth request asks locked, and while
	// no login has failed it answers without the mutex
	n atomic.Int64
}

type lockKey struct{ peer, name, salt string }

type lockEntry struct {
	n     int
	first time.Time
}

// lockConf is the [chttpd_auth_lockout] section; mode "enforce" is
// CouchDB's default, an unknown mode is off.
type lockConf struct {
	mode      string // off, warn, enforce
	threshold int
	maxObjs   int
	lifetime  time.Duration
	ipHeader  string
}

var errLockedOut = newErr(403, "forbidden", "Account is temporarily locked due to multiple authentication failures")

func loadLockConf(s Settings) lockConf {
	c := lockConf{mode: "enforce", threshold: 5, maxObjs: 10000, lifetime: 300 * time.Second}
	if s == nil {
		return c
	}
	get := func(k string) (string, bool) {
		v, err := s.ConfigValue("chttpd_auth_lockout", k)
		return v, err == nil
	}
	if v, ok := get("mode"); ok {
		switch v {
		case "off", "warn", "enforce":
			c.mode = v
		default:
			c.mode = "off"
		}
	}
	if v, ok := get("threshold"); ok {
		if i, err := strconv.Atoi(v); err == nil {
			c.threshold = i
		}
	}
	if v, ok := get("max_objects"); ok {
		if i, err := strconv.Atoi(v); err == nil && i > 0 {
			c.maxObjs = i
		}
	}
	if v, ok := get("max_lifetime"); ok {
		if i, err := strconv.Atoi(v); err == nil && i > 0 {
			c.lifetime = time.Duration(i) * time.Millisecond
		}
	}
	c.ipHeader, _ = get("client_ip_header")
	return c
}

// peer is the client's address as CouchDB takes it: the first address of
// client_ip_header when that is configured and sent, else the socket's.
func (c lockConf) peer(rq *req) string {
	if c.ipHeader != "" {
		if f := strings.FieldsFunc(rq.r.Header.Get(c.ipHeader), func(r rune) bool { return r == ',' || r == ' ' }); len(f) > 0 {
			return f[0]
		}
	}
	host, _, err := net.SplitHostPort(rq.r.RemoteAddr)
	if err != nil {
		return rq.r.RemoteAddr
	}
	return host
}

// locked reports whether k has reached the threshold (in warn mode it
// logs and lets the login go on).
func (l *lockout) locked(g *Gateway, c lockConf, k lockKey) bool {
	if c.mode == "off" || l.n.Load() == 0 {
		return false
	}
	l.mu.Lock()
	e := l.fails[k]
	if e != nil && time.Since(e.first) >= c.lifetime {
		delete(l.fails, k)
		l.n.Store(int64(len(l.fails)))
		e = nil
	}
	over := e != nil && e.n >= c.threshold
	l.mu.Unlock()
	if over && c.mode == "warn" {
		g.log.Warn("authentication failure threshold reached", "user", k.name, "peer", k.peer)
		return false
	}
	return over
}

// failed counts a failed login of k.
func (l *lockout) failed(c lockConf, k lockKey) {
	if c.mode == "off" {
		return
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fails == nil {
		l.fails = map[lockKey]*lockEntry{}
	}
	if e := l.fails[k]; e != nil && now.Sub(e.first) < c.lifetime {
		e.n++
		return
	}
	if len(l.fails) >= c.maxObjs {
		l.evict(c, now)
	}
	l.fails[k] = &lockEntry{n: 1, first: now}
	l.n.Store(int64(len(l.fails)))
}

// evict drops the expired entries, else the oldest, to make room.
func (l *lockout) evict(c lockConf, now time.Time) {
	var oldest lockKey
	var at time.Time
	for k, e := range l.fails {
		if now.Sub(e.first) >= c.lifetime {
			delete(l.fails, k)
			continue
		}
		if at.IsZero() || e.first.Before(at) {
			oldest, at = k, e.first
		}
	}
	if len(l.fails) >= c.maxObjs {
		delete(l.fails, oldest)
	}
}

// start counts a login of k that is about to compute its hash, unless k
// has reached the threshold: then nothing is counted and it answers false
// (refuse the login). The check and the count are one step, so attempts
// sent at once cannot all pass the check before any is counted. In warn
// mode it logs, counts and lets the login go on.
func (l *lockout) start(g *Gateway, c lockConf, k lockKey) bool {
	if c.mode == "off" {
		return true
	}
	now := time.Now()
	l.mu.Lock()
	if l.fails == nil {
		l.fails = map[lockKey]*lockEntry{}
	}
	e := l.fails[k]
	if e != nil && now.Sub(e.first) >= c.lifetime {
		delete(l.fails, k)
		e = nil
	}
	if e != nil && e.n >= c.threshold && c.mode == "enforce" {
		l.mu.Unlock()
		return false
	}
	over := e != nil && e.n >= c.threshold
	if e != nil {
		e.n++
	} else {
		if len(l.fails) >= c.maxObjs {
			l.evict(c, now)
		}
		l.fails[k] = &lockEntry{n: 1, first: now}
	}
	l.n.Store(int64(len(l.fails)))
	l.mu.Unlock()
	if over {
		g.log.Warn("authentication failure threshold reached", "user", k.name, "peer", k.peer)
	}
	return true
}

// release takes back the count of a started login of k that succeeded.
// An entry left with no count is dropped, so its window does not begin
// at a login that succeeded.
func (l *lockout) release(c lockConf, k lockKey) {
	if c.mode == "off" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.fails[k]; e != nil {
		if e.n--; e.n <= 0 {
			delete(l.fails, k)
			l.n.Store(int64(len(l.fails)))
		}
	}
}
