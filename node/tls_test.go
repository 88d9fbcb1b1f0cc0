package node_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/settee/settee/httpgw"
	"github.com/settee/settee/internal/testport"
	"github.com/settee/settee/internal/testserver"
	"github.com/settee/settee/node"
)

// testCert writes a self-signed ECDSA certificate for 127.0.0.1 and its
// key into dir and returns the files and the certificate.
func testCert(t *testing.T, dir, name string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	write := func(f, typ string, b []byte) {
		if err := os.WriteFile(f+".tmp", pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		// renamed into place, as a certificate renewal does
		if err := os.Rename(f+".tmp", f); err != nil {
			t.Fatal(err)
		}
	}
	write(certFile, "CERTIFICATE", der)
	write(keyFile, "EC PRIVATE KEY", kder)
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

// httpsClient trusts only cert.
func httpsClient(cert *x509.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

func withTLS(certFile, keyFile string) testserver.Option {
	return func(c *node.Config) {
		c.TLS = node.TLSConfig{Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile}
	}
}

func send(t *testing.T, c *http.Client, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A node started with a certificate serves the same API over HTTPS beside
// plain HTTP, and _config shows where (chttpd and ssl, as CouchDB's ini).
func TestTLSServesHTTPS(t *testing.T) {
	certFile, keyFile, cert := testCert(t, t.TempDir(), "settee")
	s := testserver.Start(t, withTLS(certFile, keyFile))
	base := "https://" + s.Node.TLSAddr()
	c := httpsClient(cert)
	for _, tc := range []struct {
		method, path, body string
		status             int
		inBody             string
	}{
		{"GET", "/", "", 200, `"couchdb":"Welcome"`},
		{"PUT", "/tls-db", "", 201, `"ok":true`},
		{"PUT", "/tls-db/doc", `{"over":"tls"}`, 201, `"id":"doc"`},
		{"GET", "/tls-db/doc", "", 200, `"over":"tls"`},
	} {
		status, body := send(t, c, tc.method, base+tc.path, tc.body)
		if status != tc.status || !strings.Contains(body, tc.inBody) {
			t.Fatalf("%s %s over https: %d %s, want %d with %s", tc.method, tc.path, status, body, tc.status, tc.inBody)
		}
	}
	// the same database over plain HTTP
	if status, body := send(t, http.DefaultClient, "GET", s.URL+"/tls-db/doc", ""); status != 200 || !strings.Contains(body, `"over":"tls"`) {
		t.Fatalf("GET over http: %d %s", status, body)
	}
	_, httpPort, _ := net.SplitHostPort(s.Node.Addr())
	_, tlsPort, _ := net.SplitHostPort(s.Node.TLSAddr())
	for _, tc := range []struct{ key, want string }{
		{"chttpd/port", httpPort},
		{"chttpd/bind_address", "127.0.0.1"},
		{"ssl/enable", "true"},
		{"ssl/port", tlsPort},
		{"ssl/cert_file", certFile},
		{"ssl/key_file", keyFile},
	} {
		status, body := send(t, c, "GET", base+"/_node/_local/_config/"+tc.key, "")
		var got string
		if status != 200 || json.Unmarshal([]byte(body), &got) != nil || got != tc.want {
			t.Fatalf("GET _config/%s: %d %s, want %q", tc.key, status, body, tc.want)
		}
	}
}

// What is not HTTPS on the HTTPS port gets a clean refusal, not a hang.
func TestTLSRefusesPlainHTTP(t *testing.T) {
	certFile, keyFile, cert := testCert(t, t.TempDir(), "settee")
	s := testserver.Start(t, withTLS(certFile, keyFile))
	status, body := send(t, &http.Client{Timeout: 10 * time.Second}, "GET", "http://"+s.Node.TLSAddr()+"/", "")
	if status != 400 || !strings.Contains(body, "HTTP request to an HTTPS server") {
		t.Fatalf("plain HTTP to the HTTPS port: %d %q, want 400", status, body)
	}
	// a client that does not trust the certificate fails its handshake
	_, err := http.Get("https://" + s.Node.TLSAddr() + "/")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusting client: %v, want a certificate error", err)
	}
	// and the server still serves those that do
	if status, _ := send(t, httpsClient(cert), "GET", "https://"+s.Node.TLSAddr()+"/", ""); status != 200 {
		t.Fatalf("GET / after the refusals: %d", status)
	}
}

// Bad certificate settings fail the start with an error that says what,
// before anything listens.
func TestTLSBadInputFailsStart(t *testing.T) {
	dir := t.TempDir()
	certA, keyA, _ := testCert(t, dir, "a")
	_, keyB, _ := testCert(t, dir, "b")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tls  node.TLSConfig
		want string
	}{
		{"missing cert file", node.TLSConfig{Addr: "127.0.0.1:0", CertFile: filepath.Join(dir, "nope.crt"), KeyFile: keyA}, "nope.crt: no such file"},
		{"missing key file", node.TLSConfig{Addr: "127.0.0.1:0", CertFile: certA, KeyFile: filepath.Join(dir, "nope.key")}, "nope.key: no such file"},
		{"key of another cert", node.TLSConfig{Addr: "127.0.0.1:0", CertFile: certA, KeyFile: keyB}, "private key does not match public key"},
		{"not PEM", node.TLSConfig{Addr: "127.0.0.1:0", CertFile: garbage, KeyFile: keyA}, "failed to find any PEM data"},
		{"no key file named", node.TLSConfig{Addr: "127.0.0.1:0", CertFile: certA}, "needs a certificate file and a key file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := node.Default()
			cfg.Handler = httpgw.ForNode
			cfg.DataDir = t.TempDir()
			cfg.HTTPAddr = "127.0.0.1:0"
			cfg.Admin = testserver.AdminUser + ":" + testserver.AdminPassword
			cfg.MemoryMB = 64
			cfg.TLS = tc.tls
			n, err := node.Start(context.Background(), cfg)
			if err == nil {
				_ = n.Close(context.Background())
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// [ssl] and chttpd/port written through _config take effect at the next
// start: they win over the flags, as a local.ini written at run time.
func TestTLSFromConfigAtRestart(t *testing.T) {
	certFile, keyFile, cert := testCert(t, t.TempDir(), "settee")
	s := testserver.Start(t)
	if s.Node.TLSAddr() != "" {
		t.Fatal("https on without a certificate")
	}
	_, tlsPort, _ := net.SplitHostPort(testport.Addr(t))
	_, httpPort, _ := net.SplitHostPort(testport.Addr(t))
	for _, kv := range [][2]string{
		{"ssl/cert_file", certFile}, {"ssl/key_file", keyFile}, {"ssl/port", tlsPort}, {"ssl/enable", "true"},
		{"chttpd/port", httpPort},
	} {
		b, _ := json.Marshal(kv[1])
		if status, body := send(t, http.DefaultClient, "PUT", s.URL+"/_node/_local/_config/"+kv[0], string(b)); status != 200 {
			t.Fatalf("PUT _config/%s: %d %s", kv[0], status, body)
		}
	}
	if s.Node.TLSAddr() != "" {
		t.Fatal("https on before a restart")
	}
	s.Restart(t)
	if got := s.Node.TLSAddr(); got != "127.0.0.1:"+tlsPort {
		t.Fatalf("https on %q after the restart, want port %s", got, tlsPort)
	}
	if got := s.Node.Addr(); got != "127.0.0.1:"+httpPort {
		t.Fatalf("http on %q after the restart, want port %s", got, httpPort)
	}
	if status, _ := send(t, httpsClient(cert), "GET", "https://"+s.Node.TLSAddr()+"/", ""); status != 200 {
		t.Fatalf("GET / over https: %d", status)
	}
	for _, tc := range []struct{ key, val string }{{"ssl/enable", "yes"}, {"ssl/port", "70000"}, {"chttpd/port", "http"}} {
		b, _ := json.Marshal(tc.val)
		if status, body := send(t, http.DefaultClient, "PUT", "http://"+s.Node.Addr()+"/_node/_local/_config/"+tc.key, string(b)); status != 400 {
			t.Fatalf("PUT _config/%s %q: %d %s, want 400", tc.key, tc.val, status, body)
		}
	}
}

// A renewed certificate, renamed over the old files, is served to new
// connections without a restart.
func TestTLSReloadsCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, old := testCert(t, dir, "settee")
	s := testserver.Start(t, withTLS(certFile, keyFile))
	url := "https://" + s.Node.TLSAddr() + "/"
	if status, _ := send(t, httpsClient(old), "GET", url, ""); status != 200 {
		t.Fatalf("GET / with the first certificate: %d", status)
	}
	_, _, renewed := testCert(t, dir, "settee")
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := httpsClient(renewed).Get(url)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate is not served: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The HTTPS server's goroutines end with Close, like the HTTP server's.
func TestTLSCloseLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t, append(libraryGoroutines, goleak.IgnoreCurrent())...)
	certFile, keyFile, cert := testCert(t, t.TempDir(), "settee")
	s := testserver.Start(t, withTLS(certFile, keyFile))
	c := httpsClient(cert)
	if status, _ := send(t, c, "PUT", "https://"+s.Node.TLSAddr()+"/leak-tls", ""); status != 201 {
		t.Fatalf("PUT over https: %d", status)
	}
	c.CloseIdleConnections()
	s.Stop(t)
}
