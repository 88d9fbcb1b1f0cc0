package httpgw_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/settee/settee/internal/testserver"
)

// BenchmarkGetDoc is fabric_bench's random get: one client, sequential
// GETs of a medium-sized doc, through HTTP, the actors and badger.
func BenchmarkGetDoc(b *testing.B) {
	s := testserver.Start(b)
	resp := s.Do(b, "PUT", "/bg", nil)
	resp.Body.Close()
	body := `{"data":"` + string(bytes.Repeat([]byte("x"), 14000)) + `"}`
	for i := range 100 {
		resp := s.Do(b, "PUT", fmt.Sprintf("/bg/d%d", i), body)
		resp.Body.Close()
	}
	req := s.NewRequest(b, "GET", "/bg/d1", nil)
	req.SetBasicAuth(testserver.AdminUser, testserver.AdminPassword)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req.URL.Path = fmt.Sprintf("/bg/d%d", i%100)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.StatusCode)
		}
	}
}
