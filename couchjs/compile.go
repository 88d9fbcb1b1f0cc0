package couchjs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// compiled is one function source made into a program that evaluates to a
// factory function(require) returning the user's function. The factory
// keeps the source's top-level declarations private to it (couchjs
// evaluates each function in its own sandbox) and binds require per
// design doc.
type compiled struct {
	src  string
	prog *goja.Program
}

// maxPrograms bounds a worker's cache of compiled sources; past it the
// cache starts over (sources are few per database: one per function).
const maxPrograms = 4096

// program is src compiled, from the worker's cache.
func (e *engine) program(src string) (*compiled, error) {
	if c := e.progs[src]; c != nil {
		return c, nil
	}
	c, err := compileSource(src)
	if err != nil {
		return nil, err
	}
	if len(e.progs) >= maxPrograms {
		clear(e.progs)
	}
	e.progs[src] = c
	return c, nil
}

const (
	factoryHead = "(function(require){"
	factoryTail = "\n})"
)

// compileSource turns src into a factory program. Like couchjs (which
// rewrites the source with esprima first), it accepts a bare anonymous
// function declaration as the last statement, "function(doc) {...}",
// which plain JavaScript rejects, and answers with the value of the last
// statement: any other last statement makes "Expression does not eval to a
// function", found when the factory runs.
func compileSource(src string) (*compiled, error) {
	if src == "" {
		return nil, &Error{Code: "not_found", Reason: "missing function"}
	}
	body := src
	prog, perr := parser.ParseFile(nil, "", src, 0)
	if perr != nil {
		// The one rewrite: `function(` where a statement starts.
		at, ok := anonFunctionAt(src, perr)
		if !ok {
			return nil, syntaxError(perr, src)
		}
		body = src[:at] + "return " + src[at:]
		wrapped := factoryHead + body + factoryTail
		fprog, err := parser.ParseFile(nil, "", wrapped, 0)
		if err != nil {
			return nil, syntaxError(err, src)
		}
		if !returnsLast(fprog, len(factoryHead)+at) {
			// statements after the function: their value is the
			// source's, and it is not the function (CouchDB evaluates
			// the source and checks what it gives)
			return nil, &Error{Code: "compilation_error", Reason: "Expression does not eval to a function. (" + src + ")"}
		}
	} else if n := len(prog.Body); n > 0 {
		if es, ok := prog.Body[n-1].(*ast.ExpressionStatement); ok {
			prevEnd := 0
			if n > 1 {
				prevEnd = int(prog.Body[n-2].Idx1()) - prog.File.Base()
			}
			at := exprStart(src, int(es.Idx0())-prog.File.Base(), prevEnd)
			body = src[:at] + "return " + src[at:]
		}
	}
	p, err := goja.Compile("", factoryHead+body+factoryTail, false)
	if err != nil {
		return nil, syntaxError(err, src)
	}
	return &compiled{src: src, prog: p}, nil
}

// anonFunctionAt finds, from the parser's first error, an anonymous
// function declaration: the error is at "(" right after the keyword.
func anonFunctionAt(src string, err error) (int, bool) {
	var el parser.ErrorList
	if !errors.As(err, &el) || len(el) == 0 {
		return 0, false
	}
	e := el[0]
	if e.Message != "Unexpected token (" {
		return 0, false
	}
	off := offsetOf(src, e.Position.Line, e.Position.Column)
	if off < 0 {
		return 0, false
	}
	before := strings.TrimRight(src[:off], " \t\r\n")
	if !strings.HasSuffix(before, "function") {
		return 0, false
	}
	at := len(before) - len("function")
	if at > 0 {
		c := src[at-1]
		if c == '_' || c == '$' || c == '.' || (c|0x20 >= 'a' && c|0x20 <= 'z') || (c >= '0' && c <= '9') {
			return 0, false
		}
	}
	return at, true
}

// returnsLast reports whether the factory's last statement is the return
// inserted at offset at.
func returnsLast(prog *ast.Program, at int) bool {
	if len(prog.Body) != 1 {
		return false
	}
	es, ok := prog.Body[0].(*ast.ExpressionStatement)
	if !ok {
		return false
	}
	fe, ok := es.Expression.(*ast.FunctionLiteral)
	if !ok {
		return false
	}
	stmts := fe.Body.List
	if len(stmts) == 0 {
		return false
	}
	rs, ok := stmts[len(stmts)-1].(*ast.ReturnStatement)
	return ok && int(rs.Idx0())-prog.File.Base() == at
}

// offsetOf converts a 1-based line and column into a byte offset.
func offsetOf(src string, line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(src[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
	}
	off += col - 1
	if off > len(src) {
		return -1
	}
	return off
}

// syntaxError formats a parse error as couchjs reports esprima's:
// (new Error("Line 1: Unexpected token }", "./share/server/main.js", 1)) (SRC)
func syntaxError(err error, src string) *Error {
	msg := err.Error()
	var el parser.ErrorList
	var pe *parser.Error
	var ce *goja.CompilerSyntaxError
	switch {
	case errors.As(err, &el) && len(el) > 0:
		msg = fmt.Sprintf("Line %d: %s", el[0].Position.Line, el[0].Message)
	case errors.As(err, &pe):
		msg = fmt.Sprintf("Line %d: %s", pe.Position.Line, pe.Message)
	case errors.As(err, &ce):
		msg = ce.Message
	}
	return &Error{Code: "compilation_error", Reason: "(new Error(" + jsString(msg) + ", \"./share/server/main.js\", 1)) (" + src + ")"}
}

// jsString quotes s as JSON does, without HTML escapes.
func jsString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// exprStart moves the start of an expression statement back over the
// parentheses around it (the parser's Idx0 is inside them), not past the
// previous statement's end.
func exprStart(src string, at, prevEnd int) int {
	j := at
	for j > prevEnd && (src[j-1] == '(' || isSpace(src[j-1])) {
		j--
	}
	for j < at && isSpace(src[j]) {
		j++
	}
	return j
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
