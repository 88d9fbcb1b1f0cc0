package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestPing(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_up" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer up.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	tests := []struct {
		name string
		url  string
		ok   bool
	}{
		{"up", up.URL, true},
		{"maintenance", down.URL, false},
		{"unreachable", "http://127.0.0.1:1", false},
		{"bad url", "::", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := ping(tc.url); (err == nil) != tc.ok {
				t.Fatalf("ping(%s) = %v, want ok=%v", tc.url, err, tc.ok)
			}
		})
	}
}

func TestServeRefusesMissingAdminWhenRequired(t *testing.T) {
	t.Setenv("SETTEE_REQUIRE_ADMIN", "1")
	t.Setenv("SETTEE_ADMIN", "")
	if err := serve([]string{"--data-dir", t.TempDir(), "--http", "127.0.0.1:0"}); err == nil {
		t.Fatal("serve started without an admin although SETTEE_REQUIRE_ADMIN is set")
	}
	t.Setenv("SETTEE_ADMIN", "nopassword")
	if err := serve([]string{"--data-dir", t.TempDir(), "--http", "127.0.0.1:0"}); err == nil {
		t.Fatal("serve started with a malformed SETTEE_ADMIN")
	}
}
