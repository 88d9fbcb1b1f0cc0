package kivik_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// node is the node kivik's config calls name: this one.
const node = "_local"

// testConfig is what settee's _config holds today: the smoosh section.
func testConfig(t *testing.T, e *env) {
	c := e.admin
	const section, key = "smoosh", "check_interval"

	before, errBefore := c.ConfigValue(ctx(t), node, section, key)
	if e.settee && (errBefore != nil || before == "") {
		t.Fatalf("ConfigValue %s/%s = %q %v, want settee's default", section, key, before, errBefore)
	}
	old, err := c.SetConfigValue(ctx(t), node, section, key, "123")
	must(t, "SetConfigValue", err)
	t.Cleanup(func() {
		if errBefore == nil {
			_, err = c.SetConfigValue(ctx(t), node, section, key, before)
		} else {
			_, err = c.DeleteConfigKey(ctx(t), node, section, key)
		}
		if err != nil {
			t.Errorf("restore %s/%s: %v", section, key, err)
		}
	})
	if old != before {
		t.Errorf("SetConfigValue answered the old value %q, want %q", old, before)
	}
	if v, err := c.ConfigValue(ctx(t), node, section, key); err != nil || v != "123" {
		t.Errorf("ConfigValue after set = %q %v, want 123", v, err)
	}
	sec, err := c.ConfigSection(ctx(t), node, section)
	must(t, "ConfigSection", err)
	if sec[key] != "123" {
		t.Errorf("ConfigSection %s = %v, want %s 123", section, sec, key)
	}
	all, err := c.Config(ctx(t), node)
	must(t, "Config", err)
	if all[section][key] != "123" {
		t.Errorf("Config[%s] = %v, want %s 123", section, all[section], key)
	}

	// only admins
	anon := e.client(t, e.url)
	_, err = anon.ConfigSection(ctx(t), node, section)
	wantStatus(t, "anonymous ConfigSection", err, http.StatusUnauthorized, "")
}

// testConfigFull is what a kivik user does with CouchDB's whole _config.
func testConfigFull(t *testing.T, e *env) {
	c := e.admin
	t.Run("Sections", func(t *testing.T) {
		all, err := c.Config(ctx(t), node)
		must(t, "Config", err)
		// CouchDB lists the values set in its ini files, not the defaults
		for _, s := range []string{"couchdb", "chttpd", "cluster", "admins", "smoosh"} {
			if _, ok := all[s]; !ok {
				t.Errorf("Config has no %s section", s)
			}
		}
		if h := all["admins"][e.user]; !strings.HasPrefix(h, "-pbkdf2") {
			t.Errorf("Config admins/%s = %q, want a -pbkdf2 hash", e.user, h)
		}
		if u, _ := url.Parse(e.url); all["chttpd"]["port"] != u.Port() {
			t.Errorf("Config chttpd/port = %q, want the server's %s", all["chttpd"]["port"], u.Port())
		}
	})
	t.Run("Section", func(t *testing.T) {
		sec, err := c.ConfigSection(ctx(t), node, "cluster")
		must(t, "ConfigSection cluster", err)
		if sec["q"] == "" || sec["n"] == "" {
			t.Errorf("ConfigSection cluster = %v, want q and n", sec)
		}
	})
	t.Run("Value", func(t *testing.T) {
		_, err := c.ConfigValue(ctx(t), node, "couchdb", "no_such_key")
		wantStatus(t, "ConfigValue of a missing key", err, http.StatusNotFound, "unknown_config_value")
		v, err := c.ConfigValue(ctx(t), node, "chttpd", "bind_address")
		must(t, "ConfigValue chttpd/bind_address", err)
		if v != "127.0.0.1" {
			t.Errorf("chttpd/bind_address = %q, want 127.0.0.1", v)
		}
	})
	t.Run("SetAndDelete", func(t *testing.T) {
		old, err := c.SetConfigValue(ctx(t), node, "kivik_test", "greeting", "hello")
		must(t, "SetConfigValue a new key", err)
		if old != "" {
			t.Errorf("SetConfigValue of a new key answered %q, want \"\"", old)
		}
		old, err = c.SetConfigValue(ctx(t), node, "kivik_test", "greeting", "hi")
		must(t, "SetConfigValue again", err)
		if old != "hello" {
			t.Errorf("SetConfigValue answered %q, want hello", old)
		}
		if v, err := c.ConfigValue(ctx(t), node, "kivik_test", "greeting"); err != nil || v != "hi" {
			t.Errorf("ConfigValue = %q %v, want hi", v, err)
		}
		old, err = c.DeleteConfigKey(ctx(t), node, "kivik_test", "greeting")
		must(t, "DeleteConfigKey", err)
		if old != "hi" {
			t.Errorf("DeleteConfigKey answered %q, want hi", old)
		}
		_, err = c.ConfigValue(ctx(t), node, "kivik_test", "greeting")
		wantStatus(t, "ConfigValue after DeleteConfigKey", err, http.StatusNotFound, "")
		_, err = c.DeleteConfigKey(ctx(t), node, "kivik_test", "greeting")
		wantStatus(t, "DeleteConfigKey of a missing key", err, http.StatusNotFound, "")
	})
	t.Run("DeleteSmooshKey", func(t *testing.T) {
		_, err := c.SetConfigValue(ctx(t), node, "smoosh", "kivik_extra", "1")
		must(t, "SetConfigValue smoosh/kivik_extra", err)
		old, err := c.DeleteConfigKey(ctx(t), node, "smoosh", "kivik_extra")
		if err != nil || old != "1" {
			t.Errorf("DeleteConfigKey smoosh/kivik_extra = %q %v, want 1", old, err)
		}
	})
}
