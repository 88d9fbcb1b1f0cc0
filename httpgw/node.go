package httpgw

import (
	"net/http"

	"github.com/settee/settee/node"
)

// ForNode builds the gateway of a started node; it is the node's
// Config.Handler in settee serve and in the tests. The gateway sees the
// node only through the interfaces of Config.
func ForNode(s node.Services) (http.Handler, error) {
	cfg := Config{
		Coordinator:     s.Coordinator,
		Databases:       s.Node,
		Cluster:         s.Node,
		Settings:        s.Node,
		DBUpdates:       s.Node,
		Tasks:           s.Tasks,
		Admin:           s.Admin,
		AdminPassword:   s.AdminPassword,
		CookieSecret:    s.CookieSecret,
		UUID:            s.UUID,
		Version:         s.Version,
		GitSHA:          s.GitSHA,
		NodeName:        s.Name,
		DefaultQ:        s.DefaultQ,
		MaxDocumentSize: s.MaxDocumentSize,
		MaxRequestSize:  s.MaxRequestSize,
		RequestTimeout:  s.RequestTimeout,
		Logger:          s.Logger,
		Replicator:      s.Replicator,
		Metrics:         s.Metrics,
		JS:              s.JS,
		Policy:          s.Policy,
		NodeKey:         s.NodeKey,
		Connections:     s.Node.Connections,
	}
	return New(cfg)
}
