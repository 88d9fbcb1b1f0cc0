// Package policy is the one place that decides what a user may write and
// read. Every entry that writes or reads documents on a user's behalf —
// the HTTP handlers (PUT, POST, _bulk_docs, COPY, attachments, _update,
// forms), local replication and _replicator jobs, the console (through the
// HTTP handler), anything added later — reaches the coordinator through
// it, with the Subject it acts for. Internal replication and read repair
// write shard to shard and stay outside: they copy what a user's write
// already passed.
//
// A write passes, in CouchDB's order: the database's members, the _users
// rules (and password hashing), design docs for database admins only (and
// their fields and functions compiled), a conflict found against the
// database as it was before the batch (so a repeated id cannot ride on an
// earlier entry's predicted revision), and every validate_doc_update of the
// database with CouchDB's userCtx and secObj. A read passes the members
// and, in _users, the own-doc-only rule.
//
// The policy is also the one loader and cache of design docs (Design,
// Designs in designs.go): the validate_doc_update functions, the
// gateway's views, shows, lists, updates, filters, rewrites and Mango
// indexes, and a local replication's filter all come from it. The views
// package keeps a DesignCache of its own: its index builder parses the
// design doc bytes a query carries across the cluster, below the policy.
package policy

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	"github.com/settee/settee/auth"
	"github.com/settee/settee/coordinator"
	"github.com/settee/settee/couchjs"
	pb "github.com/settee/settee/proto"
)

// UsersDB is the authentication database.
const UsersDB = "_users"

// ReplicatorDB is the replication database.
const ReplicatorDB = "_replicator"

// Settings reads the node's runtime configuration.
type Settings interface {
	ConfigValue(section, key string) (string, error)
}

// Config wires a Policy.
type Config struct {
	Coordinator *coordinator.Coordinator
	// JS runs validate_doc_update functions and compiles design docs'
	// functions; nil: no JavaScript (no VDU runs, nothing is compiled).
	JS *couchjs.Pool
	// Settings is the node's runtime configuration: chttpd_auth/iterations
	// (the PBKDF2 iterations of a password hashed into _users) and the
	// rules' other settings are read live from it.
	Settings Settings
}

// Policy decides for every write and read of a user.
type Policy struct {
	cfg     Config
	c       *coordinator.Coordinator
	designs designCache
}

// New builds a Policy.
func New(cfg Config) *Policy {
	return &Policy{cfg: cfg, c: cfg.Coordinator}
}

// Subject is who acts: a user as the authentication handlers found it,
// or, for a replication job, the user it runs as. The zero value is the
// anonymous user. A request's subject (ForRequest) remembers the security
// objects it was checked against, so one request reads each database's
// _security once; a job's does not (it lives longer than a _security).
type Subject struct {
	Name  string
	Roles []string
	// ServerAdmin: the user is a server admin (its roles hold "_admin").
	ServerAdmin bool

	remember bool
	mu       sync.Mutex
	sec      map[string]*Security
}

// NewSubject is the subject for a named user (name "" is anonymous).
func NewSubject(name string, roles []string, serverAdmin bool) *Subject {
	return &Subject{Name: name, Roles: roles, ServerAdmin: serverAdmin}
}

// ForRequest is the subject of one request: it remembers each database's
// security object for the request's life.
func ForRequest(name string, roles []string, serverAdmin bool) *Subject {
	return &Subject{Name: name, Roles: roles, ServerAdmin: serverAdmin, remember: true}
}

// Admin is a server admin acting as the node itself (local replications
// started by a server admin, system work on a user's behalf).
func Admin(name string) *Subject {
	return &Subject{Name: name, Roles: []string{"_admin"}, ServerAdmin: true}
}

func (s *Subject) anonymous() bool { return s == nil || s.Name == "" && !s.ServerAdmin }

type subjectKey struct{}

// WithSubject carries s in ctx to work started on its behalf that
// outlives no request but is handed over by interfaces that take none (a
// transient replication started by POST /_replicate).
func WithSubject(ctx context.Context, s *Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, s)
}

// SubjectFrom is the subject WithSubject put in ctx (nil: none).
func SubjectFrom(ctx context.Context) *Subject {
	s, _ := ctx.Value(subjectKey{}).(*Subject)
	return s
}

// UserCtx is the subject as CouchDB's functions see it: {db, name, roles}.
func (s *Subject) UserCtx(db string) []byte {
	u := struct {
		DB    string   `json:"db"`
		Name  *string  `json:"name"`
		Roles []string `json:"roles"`
	}{DB: db, Roles: []string{}}
	if s != nil && s.Name != "" {
		u.Name = &s.Name
	}
	if s != nil && s.Roles != nil {
		u.Roles = s.Roles
	}
	b, _ := json.Marshal(u)
	return b
}

// Errors a Policy answers, in CouchDB's names and reasons; the gateway's
// error table gives their statuses.
var (
	ErrUnauthorized    = &pb.Error{Code: "unauthorized", Reason: "You are not authorized to access this db."}
	ErrForbidden       = &pb.Error{Code: "forbidden", Reason: "You are not allowed to access this db."}
	ErrNotDBAdmin      = &pb.Error{Code: "forbidden", Reason: "You are not a db or server admin."}
	ErrNotDBAdminAnon  = &pb.Error{Code: "unauthorized", Reason: "You are not a db or server admin."}
	ErrMissing         = &pb.Error{Code: "not_found", Reason: "missing"}
	ErrConflict        = &pb.Error{Code: "conflict", Reason: "Document update conflict."}
	ErrUsersDesignRead = &pb.Error{Code: "forbidden", Reason: "Only administrators can view design docs in the users database."}
	ErrNotServerAdmin  = &pb.Error{Code: "unauthorized", Reason: "You are not a server admin."}
	ErrUsersSecurity   = &pb.Error{Code: "forbidden", Reason: "You can't edit the security object of the user database."}
)

// Security is a database's _security object as the rights it grants.
type Security struct {
	Admins, Members Group
	// Raw is the object as stored ({} when none was set): a VDU's secObj.
	Raw []byte
}

// Group is one side of a security object: names and roles.
type Group struct {
	Names, Roles []string
}

func (g Group) empty() bool { return len(g.Names) == 0 && len(g.Roles) == 0 }

// match: the subject is named in the group or has one of its roles.
func (g Group) match(s *Subject) bool {
	if s == nil || s.Name == "" && !s.ServerAdmin {
		return false
	}
	if s.Name != "" && slices.Contains(g.Names, s.Name) {
		return true
	}
	for _, r := range s.Roles {
		if slices.Contains(g.Roles, r) {
			return true
		}
	}
	return false
}

// Security reads db's security object, once per subject and database.
func (p *Policy) Security(ctx context.Context, s *Subject, db string) (*Security, error) {
	if s != nil && s.remember {
		s.mu.Lock()
		sec := s.sec[db]
		s.mu.Unlock()
		if sec != nil {
			return sec, nil
		}
	}
	info, err := p.c.DBInfo(ctx, db)
	if err != nil {
		return nil, err
	}
	sec, err := ParseSecurity(info.Meta.Security)
	if err != nil {
		return nil, err
	}
	if s != nil && s.remember {
		s.mu.Lock()
		if s.sec == nil {
			s.sec = map[string]*Security{}
		}
		s.sec[db] = sec
		s.mu.Unlock()
	}
	return sec, nil
}

// Forget drops what s remembers of db's security (it was just changed).
func (s *Subject) Forget(db string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.sec, db)
	s.mu.Unlock()
}

// RequireMember: the subject may read and write db's documents (a server
// admin, a database admin, a member, or anyone where no member is named).
func (p *Policy) RequireMember(ctx context.Context, s *Subject, db string) error {
	if s != nil && s.ServerAdmin {
		return nil
	}
	sec, err := p.Security(ctx, s, db)
	if err != nil {
		return err
	}
	if sec.Admins.match(s) || sec.Members.empty() || sec.Members.match(s) {
		return nil
	}
	if s.anonymous() {
		return ErrUnauthorized
	}
	return ErrForbidden
}

// RequireDBAdmin: the subject may write db's design docs and _security.
func (p *Policy) RequireDBAdmin(ctx context.Context, s *Subject, db string) error {
	if s != nil && s.ServerAdmin {
		return nil
	}
	sec, err := p.Security(ctx, s, db)
	if err != nil {
		return err
	}
	if sec.Admins.match(s) {
		return nil
	}
	if s.anonymous() {
		return ErrNotDBAdminAnon
	}
	return ErrNotDBAdmin
}

// IsDBAdmin reports whether the subject is a server admin or an admin of
// db by its security object.
func (p *Policy) IsDBAdmin(ctx context.Context, s *Subject, db string) bool {
	return p.RequireDBAdmin(ctx, s, db) == nil
}

func (p *Policy) setting(section, key string) string {
	if p.cfg.Settings == nil {
		return ""
	}
	v, err := p.cfg.Settings.ConfigValue(section, key)
	if err != nil {
		return ""
	}
	return v
}

// iterations is the PBKDF2 iteration count for a password hashed now.
func (p *Policy) iterations() int {
	for _, sec := range []string{"chttpd_auth", "couch_httpd_auth"} {
		if i, err := strconv.Atoi(p.setting(sec, "iterations")); err == nil && i > 0 {
			return i
		}
	}
	return auth.DefaultIterations
}
