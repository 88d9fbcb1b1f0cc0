package httpgw

import "net/http"

// CouchDB's [csp] section (chttpd_util:maybe_add_csp_header): what it
// serves from a database's data, under the API's own origin, goes out
// with a Content-Security-Policy, so that an HTML or SVG attachment (or a
// _show's HTML) cannot run script as the user who opens it, a logged-in
// admin at the console included. Each component has <c>_enable (default
// true: any value but "false" keeps it on, as config:get_boolean with
// its default does) and <c>_header_value (the policy; an empty value is
// sent empty, as CouchDB does). CouchDB's default.ini leaves the keys
// commented out, so _config lists none of them until one is written, and
// neither does settee's; both read them at each request, so a write
// takes effect at once.
const (
	cspSection = "csp"
	// cspAttachments: attachment GET and HEAD ("sandbox": no script,
	// no same-origin access, no forms, no plugins)
	cspAttachments = "attachments"
	// cspShowList: _show and _list answers
	cspShowList = "showlist"
	// cspSandbox is the default policy of both
	cspSandbox = "sandbox"
)

// cspPolicy is the Content-Security-Policy a component's answers carry,
// and whether they carry one ([csp] <component>_enable).
func (g *Gateway) cspPolicy(component, def string) (string, bool) {
	s := g.cfg.Settings
	if s == nil {
		return def, true
	}
	if v, err := s.ConfigValue(cspSection, component+"_enable"); err == nil && v == "false" {
		return "", false
	}
	if v, err := s.ConfigValue(cspSection, component+"_header_value"); err == nil {
		return v, true
	}
	return def, true
}

// setShowListCSP sets a _show's or _list's Content-Security-Policy
// ([csp] showlist_*) over any the function's own headers name, as
// CouchDB's keystore does: a design doc's function, written by a database
// admin, must not lift the sandbox from what it renders for a server
// admin.
func (g *Gateway) setShowListCSP(h http.Header) {
	if v, ok := g.cspPolicy(cspShowList, cspSandbox); ok {
		h.Set("Content-Security-Policy", v)
	}
}

// setAttachmentHeaders sets the headers of an attachment answer that
// carries its data or its data's headers (GET, HEAD, ranges): CouchDB's
// Content-Security-Policy ([csp] attachments_*), and, settee's addition,
// X-Content-Type-Options: nosniff, so that a browser renders the data as
// the stored content type says and never sniffs, say, a text/plain
// attachment into HTML.
func (g *Gateway) setAttachmentHeaders(h http.Header) {
	if v, ok := g.cspPolicy(cspAttachments, cspSandbox); ok {
		h.Set("Content-Security-Policy", v)
	}
	h.Set("X-Content-Type-Options", "nosniff")
}
