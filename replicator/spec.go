package replicator

import (
	"cmp"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/settee/settee/mango"
)

// Spec is one endpoint of a replication as a user gives it: a URL (with or
// without credentials), {"url", "headers", "auth": {"basic": {...}}}, or a
// bare database name for a database of this node.
type Spec struct {
	URL      string // without credentials; for a local db, the db name
	Local    bool
	Headers  map[string]string
	User     string
	Password string
}

// ParseSpec reads a source or target member.
func ParseSpec(raw json.RawMessage) (*Spec, error) {
	var s Spec
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		s.URL = str
	} else {
		var obj struct {
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
			Auth    struct {
				Basic *struct {
					Username string `json:"username"`
					Password string `json:"password"`
				} `json:"basic"`
			} `json:"auth"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, errors.New("endpoint must be a URL string or an object with a url")
		}
		s.URL, s.Headers = obj.URL, obj.Headers
		if b := obj.Auth.Basic; b != nil {
			s.User, s.Password = b.Username, b.Password
		}
	}
	if s.URL == "" {
		return nil, errors.New("endpoint url is empty")
	}
	if !strings.Contains(s.URL, "://") {
		s.Local = true
		s.URL = strings.TrimSuffix(s.URL, "/")
		return &s, nil
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid endpoint url %q", redactURL(s.URL))
	}
	if u.User != nil {
		if s.User == "" {
			s.User = u.User.Username()
			s.Password, _ = u.User.Password()
		}
		u.User = nil
	}
	if strings.Trim(u.Path, "/") == "" {
		return nil, fmt.Errorf("endpoint url %q names no database", u.String())
	}
	s.URL = strings.TrimSuffix(u.String(), "/")
	return &s, nil
}

func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "<invalid url>"
}

// Redacted is the endpoint without secrets, for states and logs.
func (s *Spec) Redacted() string {
	if s.Local {
		return s.URL
	}
	if s.User == "" {
		return s.URL + "/"
	}
	u, _ := url.Parse(s.URL)
	u.User = url.UserPassword(s.User, "xxxxx")
	return u.String() + "/"
}

// idTerm is what goes into the replication id for an endpoint: as CouchDB's
// v4 ids, the user but not the password, the host, a non-default port, the
// path and the headers other than Authorization.
func (s *Spec) idTerm() any {
	if s.Local {
		return []any{"local", s.URL}
	}
	u, _ := url.Parse(s.URL)
	port := u.Port()
	if (u.Scheme == "http" && (port == "80" || port == "5984")) || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	var hs [][2]string
	for k, v := range s.Headers {
		if !strings.EqualFold(k, "authorization") {
			hs = append(hs, [2]string{strings.ToLower(k), v})
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i][0] < hs[j][0] })
	return []any{"remote", s.User, u.Hostname(), port, u.EscapedPath(), hs}
}

// Rep is a parsed replication request (POST /_replicate body or a
// _replicator doc).
type Rep struct {
	Source, Target *Spec
	Continuous     bool
	CreateTarget   bool
	Cancel         bool
	DocIDs         []string
	Selector       json.RawMessage
	selector       *mango.Selector
	// Filter is a source design doc's filter ("ddoc/name"), QueryParams
	// the req.query it is given (query_params, values as strings).
	Filter      string
	QueryParams map[string]string
	// FilterCode is the filter function's source as the source database
	// has it, read when the replication id is computed (FetchFilterCode);
	// the id hashes it, so an edited filter is another replication, as
	// CouchDB's.
	FilterCode       string
	SinceSeq         string // raw JSON
	WorkerProcesses  int
	WorkerBatchSize  int
	CheckpointMillis int
	// RetriesPerRequest is how often an HTTP request to an endpoint is
	// retried (network errors, 5xx, 429) before the job crashes; -1: the
	// endpoint's default.
	RetriesPerRequest int
	// ConnectionTimeout is how long an HTTP endpoint's peer may send
	// nothing while a request waits on it (connection_timeout); 0: the
	// scheduler's default.
	ConnectionTimeout time.Duration
	ID                string // "_replicator" doc id, or a POST /_replicate id
}

// maxConnectionTimeout caps connection_timeout: a day of silence is as
// good as none, and milliseconds past it would overflow a Duration.
const maxConnectionTimeout = 24 * time.Hour

// parseConnectionTimeout reads connection_timeout: milliseconds, a
// positive JSON integer or a string holding one (CouchDB takes both).
func parseConnectionTimeout(raw json.RawMessage) (time.Duration, error) {
	s := string(raw)
	var str string
	if json.Unmarshal(raw, &str) == nil {
		s = str
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) && n > 0 {
		n, err = math.MaxInt64, nil
	}
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("connection_timeout must be a positive integer (milliseconds), not %s", raw)
	}
	return time.Duration(min(n, maxConnectionTimeout.Milliseconds())) * time.Millisecond, nil
}

// ParseRep reads a replication request.
func ParseRep(b []byte) (*Rep, error) {
	var v struct {
		Source             json.RawMessage `json:"source"`
		Target             json.RawMessage `json:"target"`
		Continuous         bool            `json:"continuous"`
		CreateTarget       bool            `json:"create_target"`
		Cancel             bool            `json:"cancel"`
		DocIDs             []string        `json:"doc_ids"`
		Selector           json.RawMessage `json:"selector"`
		Filter             string          `json:"filter"`
		QueryParams        json.RawMessage `json:"query_params"`
		SinceSeq           json.RawMessage `json:"since_seq"`
		WorkerProcesses    int             `json:"worker_processes"`
		WorkerBatchSize    int             `json:"worker_batch_size"`
		CheckpointInterval int             `json:"checkpoint_interval"`
		RetriesPerRequest  *int            `json:"retries_per_request"`
		ConnectionTimeout  json.RawMessage `json:"connection_timeout"`
		ID                 string          `json:"replication_id"`
		// CouchDB takes these two as aliases of replication_id when
		// cancelling (a continuous job's answer names it _local_id)
		LocalID json.RawMessage `json:"_local_id"`
		AltID   json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, errors.New("replication request must be a JSON object")
	}
	if v.ID == "" {
		var local, alt string
		_ = json.Unmarshal(v.LocalID, &local)
		_ = json.Unmarshal(v.AltID, &alt)
		v.ID = cmp.Or(local, alt)
	}
	r := &Rep{Continuous: v.Continuous, CreateTarget: v.CreateTarget, Cancel: v.Cancel, DocIDs: v.DocIDs,
		WorkerProcesses: v.WorkerProcesses, WorkerBatchSize: v.WorkerBatchSize,
		CheckpointMillis: v.CheckpointInterval, ID: v.ID, RetriesPerRequest: -1}
	if v.RetriesPerRequest != nil {
		if *v.RetriesPerRequest < 0 {
			return nil, errors.New("retries_per_request must not be negative")
		}
		r.RetriesPerRequest = min(*v.RetriesPerRequest, 20)
	}
	if len(v.ConnectionTimeout) > 0 && string(v.ConnectionTimeout) != "null" {
		d, err := parseConnectionTimeout(v.ConnectionTimeout)
		if err != nil {
			return nil, err
		}
		r.ConnectionTimeout = d
	}
	if r.Cancel && len(v.Source) == 0 && v.ID != "" {
		return r, nil
	}
	if len(v.Source) == 0 || string(v.Source) == "null" {
		return nil, errors.New("source is missing")
	}
	if len(v.Target) == 0 || string(v.Target) == "null" {
		return nil, errors.New("target is missing")
	}
	var err error
	if r.Source, err = ParseSpec(v.Source); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if r.Target, err = ParseSpec(v.Target); err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	switch v.Filter {
	case "", "_doc_ids", "_selector":
	default:
		parts := strings.FieldsFunc(v.Filter, func(r rune) bool { return r == '/' })
		if len(parts) != 2 || strings.HasPrefix(v.Filter, "_") {
			return nil, fmt.Errorf("filter %q must be of the form `designname/filtername`", v.Filter)
		}
		if r.DocIDs != nil || len(v.Selector) > 0 && string(v.Selector) != "null" {
			return nil, errors.New("filter, doc_ids and selector are mutually exclusive")
		}
		r.Filter = parts[0] + "/" + parts[1]
		if len(v.QueryParams) > 0 && string(v.QueryParams) != "null" {
			var qp map[string]json.RawMessage
			if err := json.Unmarshal(v.QueryParams, &qp); err != nil {
				return nil, errors.New("query_params must be an object")
			}
			r.QueryParams = make(map[string]string, len(qp))
			for k, raw := range qp {
				// CouchDB hands the filter strings: a string as it is,
				// anything else as its JSON
				var str string
				if json.Unmarshal(raw, &str) == nil {
					r.QueryParams[k] = str
				} else {
					r.QueryParams[k] = string(raw)
				}
			}
		}
	}
	if len(v.Selector) > 0 && string(v.Selector) != "null" {
		if r.DocIDs != nil {
			return nil, errors.New("doc_ids and selector are mutually exclusive")
		}
		if r.selector, err = mango.Parse(v.Selector); err != nil {
			return nil, err
		}
		r.Selector = v.Selector
	}
	if len(v.SinceSeq) > 0 && string(v.SinceSeq) != "null" {
		r.SinceSeq = string(v.SinceSeq)
	}
	if r.WorkerProcesses <= 0 {
		r.WorkerProcesses = 4
	}
	r.WorkerProcesses = min(r.WorkerProcesses, 64)
	if r.WorkerBatchSize <= 0 {
		r.WorkerBatchSize = 500
	}
	if r.CheckpointMillis <= 0 {
		r.CheckpointMillis = 30000
	}
	return r, nil
}

// RepIDVersion is the replication id scheme; bump it when the id's inputs
// change (checkpoints are found by id).
const RepIDVersion = 4

// BaseID is the replication id without options, as CouchDB's v4: md5 over
// the server uuid, both endpoints and the filter (doc_ids, selector, a
// design doc filter's source and query_params, since_seq). Continuous and
// create_target do not change it, so a one-shot run resumes from a
// continuous run's checkpoint and vice versa.
func (r *Rep) BaseID(serverUUID string) string {
	term := []any{serverUUID, r.Source.idTerm(), r.Target.idTerm()}
	switch {
	case r.DocIDs != nil:
		term = append(term, "doc_ids", r.DocIDs)
	case r.Selector != nil:
		// canonical form, so whitespace and key order do not matter
		var v any
		_ = json.Unmarshal(r.Selector, &v)
		term = append(term, "selector", v)
	case r.Filter != "" && r.FilterCode != "":
		// as CouchDB's: the function's source (not its name) and the
		// parameters, so an edited filter starts a new replication and
		// the same function under another name resumes the old one
		term = append(term, "filter_code", r.FilterCode, r.QueryParams)
	case r.Filter != "":
		// not read from the source (an id computed without it)
		term = append(term, "filter", r.Filter, r.QueryParams)
	}
	if r.SinceSeq != "" {
		term = append(term, "since_seq", r.SinceSeq)
	}
	b, _ := json.Marshal(term)
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// FullID is BaseID plus CouchDB's option suffixes.
func (r *Rep) FullID(serverUUID string) string {
	id := r.BaseID(serverUUID)
	if r.Continuous {
		id += "+continuous"
	}
	if r.CreateTarget {
		id += "+create_target"
	}
	return id
}
