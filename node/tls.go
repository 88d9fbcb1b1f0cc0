package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// HTTPS as CouchDB's [ssl] configures it: with enable = true the node
// serves the same API over TLS on a second listener (port, default 6984),
// beside plain HTTP. The serve flags are the section's start values; a
// value written through _config wins at the next start, as every key of
// the section (and chttpd/port, chttpd/bind_address) is read at start
// only. The certificate and key files themselves are read again when they
// change on disk, so a renewed certificate needs no restart.

// TLSConfig is the HTTPS listener's configuration.
type TLSConfig struct {
	// Addr is host:port; empty serves no HTTPS unless _config's ssl/enable
	// is true. Without a host, HTTPS binds chttpd/bind_address, as CouchDB.
	Addr string
	// CertFile and KeyFile are PEM files (ssl/cert_file, ssl/key_file).
	CertFile, KeyFile string
}

const defaultTLSPort = "6984"

// splitAddr splits host:port; "any" stands for an empty host, CouchDB's
// word for every address.
func splitAddr(addr string) (host, port string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", ""
	}
	if host == "" {
		host = "any"
	}
	return host, port
}

// addrStartValues puts the chttpd and ssl start values from the flags.
func addrStartValues(cfg Config, st func(section, key, value string)) {
	host, port := splitAddr(cfg.HTTPAddr)
	st("chttpd", "bind_address", host)
	st("chttpd", "port", port)
	st("ssl", "enable", "false")
	st("ssl", "port", defaultTLSPort)
	if cfg.TLS.Addr != "" {
		st("ssl", "enable", "true")
		if _, p := splitAddr(cfg.TLS.Addr); p != "" {
			st("ssl", "port", p)
		}
	}
	if cfg.TLS.CertFile != "" {
		st("ssl", "cert_file", cfg.TLS.CertFile)
	}
	if cfg.TLS.KeyFile != "" {
		st("ssl", "key_file", cfg.TLS.KeyFile)
	}
}

// addrKeys are the keys read when the listeners start.
func addrKeys(boolean, port func(string) error) map[string]knownKey {
	nonEmpty := func(v string) error {
		if v == "" {
			return errors.New("want an address")
		}
		return nil
	}
	return map[string]knownKey{
		"chttpd/port":                 {check: port},
		"chttpd/bind_address":         {check: nonEmpty},
		"ssl/enable":                  {check: boolean},
		"ssl/port":                    {check: port},
		"ssl/verify_ssl_certificates": {check: boolean},
		"ssl/fail_if_no_peer_cert":    {check: boolean},
	}
}

// httpAddr is where plain HTTP listens: --http, unless chttpd/port or
// chttpd/bind_address were written through _config.
func (n *Node) httpAddr() string {
	c := n.conf
	host, port := c.value("chttpd", "bind_address"), c.value("chttpd", "port")
	if sh, sp := splitAddr(n.cfg.HTTPAddr); host == sh && port == sp {
		return n.cfg.HTTPAddr // as given (an IPv6 literal, a name)
	}
	if host == "any" {
		host = ""
	}
	return net.JoinHostPort(host, port)
}

// tlsSetup reads [ssl]: the HTTPS address and its TLS configuration, or
// "" when HTTPS is off. A missing or bad certificate fails the start.
func (n *Node) tlsSetup(httpAddr string) (string, *tls.Config, error) {
	c := n.conf
	if c.value("ssl", "enable") != "true" {
		return "", nil, nil
	}
	certFile, keyFile := c.value("ssl", "cert_file"), c.value("ssl", "key_file")
	if certFile == "" || keyFile == "" {
		// CouchDB: "SSL enabled but PEM certificates are missing."
		return "", nil, errors.New("node: https: ssl enable is true but cert_file or key_file is not set (--tls-cert, --tls-key)")
	}
	host := ""
	if n.cfg.TLS.Addr != "" {
		host, _, _ = net.SplitHostPort(n.cfg.TLS.Addr)
	}
	if host == "" {
		host, _, _ = net.SplitHostPort(httpAddr)
	}
	addr := net.JoinHostPort(host, c.value("ssl", "port"))
	cr := &certReloader{certFile: certFile, keyFile: keyFile, log: n.log}
	if err := cr.load(); err != nil {
		return "", nil, fmt.Errorf("node: https: %w", err)
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: cr.get}
	if ca := c.value("ssl", "cacert_file"); ca != "" && c.value("ssl", "verify_ssl_certificates") == "true" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return "", nil, fmt.Errorf("node: https: cacert_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return "", nil, fmt.Errorf("node: https: cacert_file %s: no PEM certificate in it", ca)
		}
		conf.ClientCAs, conf.ClientAuth = pool, tls.VerifyClientCertIfGiven
		if c.value("ssl", "fail_if_no_peer_cert") == "true" {
			conf.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	return addr, conf, nil
}

// certReloader serves the certificate in its files, read again when they
// change (looked at no more than once a second, so a handshake costs no
// stat calls under load). A change that does not load keeps the old one.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamps  [2]fileStamp
	checked time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func (cr *certReloader) stat() ([2]fileStamp, error) {
	var s [2]fileStamp
	for i, f := range []string{cr.certFile, cr.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return s, err
		}
		s[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	return s, nil
}

func (cr *certReloader) load() error {
	stamps, err := cr.stat()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(cr.certFile, cr.keyFile)
	if err != nil {
		return fmt.Errorf("cert_file %s, key_file %s: %w", cr.certFile, cr.keyFile, err)
	}
	cr.cert, cr.stamps, cr.checked = &cert, stamps, time.Now()
	return nil
}

func (cr *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if time.Since(cr.checked) < time.Second {
		return cr.cert, nil
	}
	cr.checked = time.Now()
	if stamps, err := cr.stat(); err == nil && stamps != cr.stamps {
		old := cr.cert
		if err := cr.load(); err != nil {
			cr.log.Warn("https: certificate files changed but do not load; keeping the old certificate", "err", err)
			cr.cert, cr.stamps = old, stamps // not again until they change again
		} else {
			cr.log.Info("https: certificate reloaded", "cert_file", cr.certFile)
		}
	}
	return cr.cert, nil
}
