package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
)

// rangeCeiling bounds the range finds from above on this machine, as
// getCeiling bounds the GETs: the server's answer to the first range find
// (25 medium docs, ~365 KB) is served by a bare net/http server, in a child
// process when it can, and the same finds are sent to it by a client built
// as m.c is, every answer parsed and checked as the server's were. What
// the client spends per answer (receiving and checking 365 KB) is the
// same in both; the rest of the two cores is what a server may use.
func (m *mangoRun) rangeCeiling(ctx context.Context, bodies [][]byte, want []int) error {
	path := m.dbPath + "/_find"
	resp, err := m.c.do(ctx, http.MethodPost, path, "", bodies[0])
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return fmt.Errorf("POST %s: reading response: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return statusError(http.MethodPost, path, resp.StatusCode, body)
	}
	reply := &ceilingReply{Header: http.Header{}, Body: body}
	if v := resp.Header.Values("Content-Type"); len(v) > 0 {
		reply.Header["Content-Type"] = v
	}
	reply.Header.Set("Content-Length", strconv.Itoa(len(body)))
	srv, err := startCeiling(reply, m.prog)
	if err != nil {
		return fmt.Errorf("bench: range ceiling: %w", err)
	}
	defer srv.stop()
	u, err := url.Parse(m.cfg.URL)
	if err != nil {
		return fmt.Errorf("%w: url: %w", ErrConfig, err)
	}
	u.Scheme, u.Host = "http", srv.addr
	c, err := newClient(u.String(), m.cfg.Concurrency)
	if err != nil {
		return err
	}
	defer c.close()
	m.prog.printf("  range ceiling: a bare net/http server (%s) on %s answering %d bytes\n", srv.where, u.Host, len(body))
	st, err := m.findsWith(ctx, c, "range ceiling", bodies, func(_ int, b []byte) (int, error) {
		return checkFindDocs(b, want, m.g, m.v, false)
	})
	if err != nil {
		return fmt.Errorf("bench: range ceiling: %w", err)
	}
	res := m.res
	res.RangeCeilingHz, res.RangeCeilingP99Ms = st.hz, st.p99
	res.RangeCeilingBytes, res.RangeCeilingServer = len(body), srv.where
	if st.hz > 0 {
		res.RangeCeilingRatio = math.Round(res.RangeHz/st.hz*1000) / 1000
	}
	return nil
}
