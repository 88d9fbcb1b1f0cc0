// Package smoosh compacts databases automatically, like CouchDB's smoosh: a
// per-node daemon looks at every database's sizes now and then and compacts
// the ones whose file has grown past a threshold times their live data,
// one at a time (or a few), optionally only inside a time window.
//
// Settings live in the "smoosh" section of the node's _config
// (/_node/_local/_config/smoosh/<key>), as strings like CouchDB's:
//
//	enabled         "true"      run at all
//	threshold       "2.0"       compact when sizes.file / sizes.active > this
//	min_file_size   "16777216"  ...and sizes.file > this many bytes
//	from, to        ""          time window "HH:MM" (local time); empty = always
//	check_interval  "60"        seconds between looks at the databases
//	concurrency     "1"         databases compacted at once
package smoosh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Section is the _config section smoosh owns.
const Section = "smoosh"

// Defaults are the settings a node starts with.
var Defaults = map[string]string{
	"enabled":        "true",
	"threshold":      "2.0",
	"min_file_size":  "16777216",
	"from":           "",
	"to":             "",
	"check_interval": "60",
	"concurrency":    "1",
}

// ErrBadValue is returned for a setting that does not parse.
var ErrBadValue = errors.New("smoosh: bad value")

// ErrUnknownKey is returned for a key smoosh does not know.
var ErrUnknownKey = errors.New("smoosh: unknown key")

// Sizes is what smoosh needs to know about a database.
type Sizes struct {
	File, Active   int64
	CompactRunning bool
}

// Target is the node smoosh works on.
type Target interface {
	AllDBs(ctx context.Context) []string
	Sizes(ctx context.Context, db string) (Sizes, error)
	Compact(ctx context.Context, db string) error
}

// Daemon is the auto-compactor of one node.
type Daemon struct {
	t    Target
	log  *slog.Logger
	save func(key, value string) error

	mu     sync.Mutex
	values map[string]string
	wake   chan struct{}

	cancel context.CancelFunc
	done   chan struct{}
	now    func() time.Time
}

// New returns a daemon with the given stored settings over the defaults;
// save (may be nil) persists a changed setting. Call Start to run it.
func New(t Target, stored map[string]string, save func(key, value string) error, log *slog.Logger) *Daemon {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v := maps.Clone(Defaults)
	for k, val := range stored {
		if _, ok := Defaults[k]; ok && validate(k, val) == nil {
			v[k] = val
		}
	}
	return &Daemon{t: t, log: log, save: save, values: v, wake: make(chan struct{}, 1), now: time.Now}
}

// Start runs the daemon until Stop.
func (d *Daemon) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.done = make(chan struct{})
	go d.loop(ctx)
}

// Stop ends the daemon and waits for it (not for compactions it started:
// they belong to the shards).
func (d *Daemon) Stop() {
	if d == nil || d.cancel == nil {
		return
	}
	d.cancel()
	<-d.done
}

// Settings returns a copy of the current settings.
func (d *Daemon) Settings() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.values)
}

// Get returns one setting.
func (d *Daemon) Get(key string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.values[key]
	return v, ok
}

// Set changes a setting and returns its previous value. The daemon looks
// at the databases again at once.
func (d *Daemon) Set(key, value string) (string, error) {
	if _, ok := Defaults[key]; !ok {
		return "", fmt.Errorf("%w: %q", ErrUnknownKey, key)
	}
	if err := validate(key, value); err != nil {
		return "", err
	}
	if d.save != nil {
		if err := d.save(key, value); err != nil {
			return "", err
		}
	}
	d.mu.Lock()
	old := d.values[key]
	d.values[key] = value
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return old, nil
}

func validate(key, v string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %s %q: %s", ErrBadValue, key, v, why) }
	switch key {
	case "enabled":
		if v != "true" && v != "false" {
			return bad("want true or false")
		}
	case "threshold":
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 1 {
			return bad("want a number above 1")
		}
	case "min_file_size":
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
			return bad("want bytes")
		}
	case "check_interval":
		if f, err := strconv.ParseFloat(v, 64); err != nil || f <= 0 {
			return bad("want seconds")
		}
	case "concurrency":
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return bad("want a positive integer")
		}
	case "from", "to":
		if v != "" {
			if _, err := parseClock(v); err != nil {
				return bad("want HH:MM")
			}
		}
	}
	return nil
}

func parseClock(s string) (time.Duration, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, ErrBadValue
	}
	return time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute, nil
}

// config is one parsed snapshot of the settings.
type config struct {
	enabled     bool
	threshold   float64
	minFile     int64
	from, to    time.Duration
	window      bool
	interval    time.Duration
	concurrency int
}

func (d *Daemon) config() config {
	v := d.Settings()
	c := config{enabled: v["enabled"] == "true"}
	c.threshold, _ = strconv.ParseFloat(v["threshold"], 64)
	c.minFile, _ = strconv.ParseInt(v["min_file_size"], 10, 64)
	secs, _ := strconv.ParseFloat(v["check_interval"], 64)
	c.interval = time.Duration(secs * float64(time.Second))
	c.concurrency, _ = strconv.Atoi(v["concurrency"])
	if v["from"] != "" && v["to"] != "" {
		c.from, _ = parseClock(v["from"])
		c.to, _ = parseClock(v["to"])
		c.window = true
	}
	return c
}

// inWindow reports whether t falls in [from, to) (wrapping past midnight).
func (c config) inWindow(t time.Time) bool {
	if !c.window {
		return true
	}
	y, m, dd := t.Date()
	at := t.Sub(time.Date(y, m, dd, 0, 0, 0, 0, t.Location()))
	if c.from <= c.to {
		return at >= c.from && at < c.to
	}
	return at >= c.from || at < c.to
}

func (d *Daemon) loop(ctx context.Context) {
	defer close(d.done)
	for {
		c := d.config()
		if c.enabled && c.inWindow(d.now()) {
			d.round(ctx, c)
		}
		t := time.NewTimer(c.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-d.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

type candidate struct {
	db    string
	ratio float64
}

// Candidates returns the databases above the threshold, worst first.
func (d *Daemon) candidates(ctx context.Context, c config) []candidate {
	var out []candidate
	for _, db := range d.t.AllDBs(ctx) {
		s, err := d.t.Sizes(ctx, db)
		if err != nil || s.CompactRunning || s.Active <= 0 || s.File <= c.minFile {
			continue
		}
		if r := float64(s.File) / float64(s.Active); r > c.threshold {
			out = append(out, candidate{db, r})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ratio > out[j].ratio })
	return out
}

// round compacts the candidates, concurrency at a time, each to its end.
func (d *Daemon) round(ctx context.Context, c config) {
	cands := d.candidates(ctx, c)
	sem := make(chan struct{}, max(1, c.concurrency))
	var wg sync.WaitGroup
	for _, cd := range cands {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			d.log.Info("smoosh: compacting", "db", cd.db, "file_over_active", strconv.FormatFloat(cd.ratio, 'f', 2, 64))
			if err := d.t.Compact(ctx, cd.db); err != nil {
				d.log.Warn("smoosh: compact", "db", cd.db, "err", err)
				return
			}
			for ctx.Err() == nil {
				s, err := d.t.Sizes(ctx, cd.db)
				if err != nil || !s.CompactRunning {
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
}
