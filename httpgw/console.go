package httpgw

import (
	"net/http"

	"github.com/settee/settee/console"
)

// newConsole builds the web console (package console) over this gateway:
// every page it shows is made of requests to g, sent as the browser's
// user, so the console can show or change nothing the API would not.
func (g *Gateway) newConsole() http.Handler {
	return console.New(console.Config{API: g, NodeName: g.cfg.NodeName, Version: g.cfg.Version, Logger: g.log})
}
