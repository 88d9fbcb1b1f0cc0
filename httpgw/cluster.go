package httpgw

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	pb "github.com/settee/settee/proto"
)

// Cluster is what the gateway needs of the node's membership; node
// implements it.
type Cluster interface {
	Clustered() bool
	Members(ctx context.Context) (*pb.MembersReply, error)
	AddNode(ctx context.Context, host string, port int, user, password string) error
	RemoveNode(ctx context.Context, name string) error
	PutNode(ctx context.Context, m *pb.Member) error
	// FinishCluster records that the cluster's setup is finished; it
	// reports false when it already was.
	FinishCluster(ctx context.Context) (bool, error)
}

func (g *Gateway) handleMembership(rq *req) error {
	if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
		// CouchDB names GET only, though it answers HEAD too
		return methodNotAllowed("GET")
	}
	if err := requireAdmin(rq); err != nil {
		return err
	}
	all, members, err := g.membership(rq)
	if err != nil {
		return err
	}
	return g.writeJSON(rq, 200, map[string]any{"all_nodes": all, "cluster_nodes": members})
}

// membership returns the live nodes and the configured members.
func (g *Gateway) membership(rq *req) (alive, members []string, err error) {
	if g.cfg.Cluster == nil {
		n := []string{g.cfg.NodeName}
		return n, n, nil
	}
	r, err := g.cfg.Cluster.Members(rq.ctx)
	if err != nil {
		return nil, nil, err
	}
	members = []string{}
	for _, m := range r.Members {
		if !m.Removed {
			members = append(members, m.Name)
		}
	}
	return r.Alive, members, nil
}

// handleNode serves /_node/{name|_local}[/_nodes[/<name>]].
func (g *Gateway) handleNode(rq *req) error {
	if err := requireAdmin(rq); err != nil {
		return err
	}
	if len(rq.segs) < 2 {
		return errMissing
	}
	name := rq.segs[1]
	if name != "_local" && name != g.cfg.NodeName {
		return g.proxyNode(rq, name)
	}
	rest := rq.segs[2:]
	if len(rest) == 0 && name != "_local" {
		// CouchDB: /_node/<its name> is that node's welcome, without the
		// features and git_sha of /
		if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
			return methodNotAllowed("GET,HEAD")
		}
		return g.writeJSON(rq, 200, map[string]any{"couchdb": "Welcome", "uuid": g.cfg.UUID, "version": "3.5.2",
			"vendor": map[string]string{"name": "settee", "version": g.cfg.Version}})
	}
	if len(rest) == 0 {
		if rq.r.Method != http.MethodGet && rq.r.Method != http.MethodHead {
			return methodNotAllowed("GET,HEAD")
		}
		info := map[string]any{"name": g.cfg.NodeName}
		if g.cfg.Cluster != nil {
			if r, err := g.cfg.Cluster.Members(rq.ctx); err == nil {
				for _, m := range r.Members {
					if m.Name == g.cfg.NodeName && m.NodeAddr != "" {
						info["node_addr"] = m.NodeAddr
					}
				}
			}
		}
		return g.writeJSON(rq, 200, info)
	}
	if rest[0] == "_nodes" {
		return g.handleNodesDB(rq, rest[1:])
	}
	if rest[0] == "_dbs" {
		return g.handleDbsDB(rq, rest[1:])
	}
	if rest[0] == "_config" {
		return g.handleConfig(rq, rest[1:])
	}
	if len(rest) == 1 && rest[0] == "_history" {
		return g.handleHistory(rq)
	}
	if len(rest) == 1 && (rq.r.Method == http.MethodGet || rq.r.Method == http.MethodHead) {
		switch rest[0] {
		case "_stats":
			return g.handleStats(rq)
		case "_system":
			return g.handleSystem(rq)
		case "_versions":
			return g.handleVersions(rq)
		case "_prometheus":
			return g.handlePrometheus(rq)
		}
	}
	// CouchDB serves the node's own shard files under /_node/_local/<db>;
	// settee has none to show: a bad name is refused as CouchDB does, any
	// other is a file the node does not have
	if !reservedNodePath[rest[0]] {
		if err := checkDBName(rest[0]); err != nil {
			return err
		}
		return newErr(404, "not_found", "no_db_file")
	}
	return errMissing
}

// reservedNodePath names what /_node/_local/ serves besides node-local
// databases (_config, _stats… are handled above for their methods).
var reservedNodePath = map[string]bool{"_config": true, "_stats": true, "_system": true, "_versions": true,
	"_prometheus": true, "_nodes": true, "_dbs": true, "_restart": true, "_smoosh": true, "_history": true}

// handleNodesDB is the _nodes database view: one doc per member.
func (g *Gateway) handleNodesDB(rq *req, rest []string) error {
	if g.cfg.Cluster == nil {
		return newErr(400, "bad_request", "this node runs without --node-addr: it has no cluster")
	}
	r, err := g.cfg.Cluster.Members(rq.ctx)
	if err != nil {
		return err
	}
	doc := func(m *pb.Member) map[string]any {
		return map[string]any{"_id": m.Name, "node_addr": m.NodeAddr, "http_addr": m.HttpAddr, "up": slices.Contains(r.Alive, m.Name)}
	}
	if len(rest) == 0 || rest[0] == "_all_docs" {
		rows := []map[string]any{}
		for _, m := range r.Members {
			if !m.Removed {
				rows = append(rows, map[string]any{"id": m.Name, "key": m.Name, "value": map[string]string{"rev": "1-0"}, "doc": doc(m)})
			}
		}
		return g.writeJSON(rq, 200, map[string]any{"total_rows": len(rows), "offset": 0, "rows": rows})
	}
	name := rest[0]
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		for _, m := range r.Members {
			if m.Name == name && !m.Removed {
				return g.writeJSON(rq, 200, doc(m))
			}
		}
		return errMissing
	case http.MethodPut:
		var body struct {
			NodeAddr string `json:"node_addr"`
			HTTPAddr string `json:"http_addr"`
		}
		if err := decodeJSONUpTo(rq, smallBody, &body); err != nil {
			return err
		}
		if body.NodeAddr == "" {
			return badRequest("a _nodes doc needs node_addr (host:port of the node's --node-addr)")
		}
		if err := g.cfg.Cluster.PutNode(rq.ctx, &pb.Member{Name: name, NodeAddr: body.NodeAddr, HttpAddr: body.HTTPAddr}); err != nil {
			return err
		}
		return g.writeJSON(rq, 201, map[string]any{"ok": true, "id": name, "rev": "1-0"})
	case http.MethodDelete:
		if err := g.cfg.Cluster.RemoveNode(rq.ctx, name); err != nil {
			return err
		}
		return g.writeJSON(rq, 200, map[string]any{"ok": true, "id": name, "rev": "2-0"})
	}
	return methodNotAllowed("GET,HEAD,PUT,DELETE")
}

// CouchDB's answers to setup actions on a node past that stage
// (setup_httpd.erl).
var (
	errClusterEnabled  = newErr(400, "bad_request", "Cluster is already enabled")
	errClusterFinished = newErr(400, "bad_request", "Cluster is already finished")
)

// handleClusterSetup is CouchDB's /_cluster_setup: GET the state, POST an
// action (enable_cluster, add_node, finish_cluster).
//
// The states map onto settee as CouchDB derives them: a node without
// --node-addr is a finished single node (its system databases exist from
// its first start; single_node_disabled would say they are missing); a
// node with --node-addr is cluster_enabled (CouchDB: bound to a
// non-loopback address with an admin), and cluster_finished once
// finish_cluster has run on any member (CouchDB: once the cluster's system
// databases exist, which finish_cluster creates). A cluster formed by
// --join or add_node works without finish_cluster.
func (g *Gateway) handleClusterSetup(rq *req) error {
	if err := requireAdmin(rq); err != nil {
		return err
	}
	clustered := g.cfg.Cluster != nil && g.cfg.Cluster.Clustered()
	switch rq.r.Method {
	case http.MethodGet, http.MethodHead:
		state := "single_node_enabled"
		if clustered {
			r, err := g.cfg.Cluster.Members(rq.ctx)
			if err != nil {
				return err
			}
			state = "cluster_enabled"
			for _, m := range r.Members {
				if m.SetupFinishedUs != 0 {
					state = "cluster_finished"
				}
			}
		}
		return g.writeJSON(rq, 200, map[string]string{"state": state})
	case http.MethodPost:
	default:
		return methodNotAllowed("GET,HEAD,POST")
	}
	if err := requireJSON(rq); err != nil {
		return err
	}
	var body struct {
		Action   string          `json:"action"`
		Host     string          `json:"host"`
		Port     json.RawMessage `json:"port"`
		Username string          `json:"username"`
		Password string          `json:"password"`
		// enable_cluster with remote_node asks that node to enable
		// itself; CouchDB answers 201 whatever the other node says
		RemoteNode json.RawMessage `json:"remote_node"`
	}
	if err := decodeJSONUpTo(rq, smallBody, &body); err != nil {
		return err
	}
	if body.Action == "enable_single_node" {
		// the setup wizards' call for a single node (Fauxton, container
		// init scripts): CouchDB answers 201 even when the node is set up
		// already, and a settee node's admin and system databases exist
		return g.writeJSON(rq, 201, okBody)
	}
	if !clustered && body.Action == "finish_cluster" {
		// a single node's system databases exist: CouchDB's answer when
		// finish_cluster finds them
		return errClusterFinished
	}
	if !clustered && body.Action != "" {
		return badRequest("this node was started without --node-addr and --cluster-secret; start every node with them to form a cluster")
	}
	switch body.Action {
	case "enable_cluster":
		// --node-addr enabled this node at start; with remote_node
		// CouchDB forwards the action and answers 201 whatever comes back,
		// and a settee node is enabled by its own flags
		if len(body.RemoteNode) > 0 && string(body.RemoteNode) != "null" {
			return g.writeJSON(rq, 201, okBody)
		}
		return errClusterEnabled
	case "finish_cluster":
		first, err := g.cfg.Cluster.FinishCluster(rq.ctx)
		if err != nil {
			return err
		}
		if !first {
			return errClusterFinished
		}
		return g.writeJSON(rq, 201, okBody)
	case "add_node":
		port := 5984
		if len(body.Port) > 0 {
			var p any
			if err := json.Unmarshal(body.Port, &p); err != nil {
				return badRequest("port must be a number")
			}
			switch v := p.(type) {
			case float64:
				port = int(v)
			case string:
				n, err := json.Number(v).Int64()
				if err != nil {
					return badRequest("port must be a number")
				}
				port = int(n)
			}
		}
		if body.Host == "" || port <= 0 || port > 65535 {
			return badRequest("add_node needs host and port")
		}
		if body.Username == "" {
			return badRequest("add_node needs the other node's admin username and password")
		}
		if err := g.cfg.Cluster.AddNode(rq.ctx, body.Host, port, body.Username, body.Password); err != nil {
			return err
		}
		return g.writeJSON(rq, 201, okBody)
	}
	return badRequest("Invalid Action: " + body.Action)
}
