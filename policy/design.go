package policy

import (
	"context"
	"errors"
	"strings"

	"github.com/settee/settee/couchjs"
	pb "github.com/settee/settee/proto"
	"github.com/settee/settee/views"
)

// CheckDesign refuses a design doc whose fields CouchDB refuses, or whose
// JavaScript does not compile (CouchDB compiles a ddoc's functions when it
// is written, and answers 400 compilation_error).
func (p *Policy) CheckDesign(ctx context.Context, db, id string, body []byte) error {
	if err := views.CheckFields(body); err != nil {
		return err
	}
	def, err := views.ParseDesign(id, body)
	if err != nil {
		return err
	}
	if v, set := def.PartitionedOption(); set && v {
		if part, err := p.c.IsPartitioned(ctx, db); err != nil || !part {
			return &pb.Error{Code: "invalid_design_doc", Reason: "partitioned option cannot be true in a non-partitioned database."}
		}
	}
	if def.Language != "javascript" || p.cfg.JS == nil {
		return nil
	}
	compile := func(kind, view, src string) error {
		err := p.cfg.JS.Compile(src)
		var je *couchjs.Error
		if errors.As(err, &je) {
			prefix := "Compilation of the " + kind + " function in the '" + view + "' view failed: "
			if !strings.HasPrefix(je.Reason, prefix) {
				return &pb.Error{Code: "compilation_error", Reason: prefix + je.Reason}
			}
		}
		return err
	}
	for _, v := range def.Views {
		if err := compile("map", v.Name, v.Map); err != nil {
			return err
		}
		if v.Reduce != "" && !strings.HasPrefix(strings.TrimSpace(v.Reduce), "_") {
			if err := compile("reduce", v.Name, v.Reduce); err != nil {
				return err
			}
		}
	}
	return nil
}
