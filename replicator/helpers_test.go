package replicator_test

import "net/http"

type httpClient struct{}

func (httpClient) do(r *http.Request) (int, error) {
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
