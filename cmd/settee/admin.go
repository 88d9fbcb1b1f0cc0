package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"
)

// admin is the cluster admin CLI. Only ping exists so far (the Docker
// healthcheck uses it); the rest of issue 6's commands come next.
func admin(args []string) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	u := fs.String("url", envDefault("url", "http://127.0.0.1:5984"), "node URL, credentials in it (SETTEE_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("usage: settee admin [--url URL] ping")
	}
	switch fs.Arg(0) {
	case "ping":
		return ping(*u)
	}
	return fmt.Errorf("unknown admin command %q", fs.Arg(0))
}

// ping exits 0 when the node answers GET /_up with 200.
func ping(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("bad --url %q", raw)
	}
	u.Path = "/_up"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s unreachable: %w", u.Host, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: /_up answered %s", u.Host, resp.Status)
	}
	fmt.Fprintln(os.Stdout, "ok")
	return nil
}
