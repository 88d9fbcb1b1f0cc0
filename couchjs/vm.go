package couchjs

import (
	_ "embed"
	"errors"
	"fmt"

	"github.com/dop251/goja"
)

//go:embed prelude.js
var preludeSrc string

// maxCallStack bounds JavaScript recursion (goja otherwise grows its stack
// until the process runs out of memory). SpiderMonkey's own limit answers
// "too much recursion"; so does this one (see exception).
const maxCallStack = 10000

// maxCachedFns bounds a runtime's per-program function cache.
const maxCachedFns = 1024

// vm is one runtime with the sandbox installed, serving the sandbox key
// alone.
type vm struct {
	e    *engine
	key  string
	rt   *goja.Runtime
	host *goja.Object

	mapDoc, reduce, validate, filter, show, list, update, makeRequire, stringify, parse goja.Callable

	fns  map[*goja.Program]goja.Value // functions with no require
	sets map[uint64]*setState         // by MapSet id

	// For a DDoc sandbox (its key determines the doc): the doc as the
	// functions' this, its require, and the functions bound to it.
	ddoc, ddocReq goja.Value
	ddocFns       map[*goja.Program]goja.Value

	// Set for the duration of a _list call.
	nextRow func() ([]byte, bool)
	chunks  func(label string, chunks []string, start goja.Value) error
}

func newVM(e *engine, key string) (*vm, error) {
	rt := goja.New()
	rt.SetMaxCallStackSize(maxCallStack)
	v := &vm{e: e, key: key, rt: rt, fns: map[*goja.Program]goja.Value{}, sets: map[uint64]*setState{}}
	init, err := rt.RunProgram(e.prelude)
	if err != nil {
		return nil, fmt.Errorf("couchjs: prelude: %w", err)
	}
	initFn, _ := goja.AssertFunction(init)
	v.host = rt.NewObject()
	set := func(name string, f any) {
		if err == nil {
			err = v.host.Set(name, f)
		}
	}
	set("log", func(s string) { e.log(s) })
	set("nextRow", func() goja.Value {
		if v.nextRow == nil {
			return goja.Null()
		}
		row, ok := v.nextRow()
		if !ok {
			return goja.Null()
		}
		return rt.ToValue(string(row))
	})
	set("chunks", func(call goja.FunctionCall) goja.Value {
		if v.chunks == nil {
			return goja.Undefined()
		}
		var cs []string
		if err := rt.ExportTo(call.Argument(1), &cs); err != nil {
			panic(rt.NewTypeError("send: %v", err))
		}
		if err := v.chunks(call.Argument(0).String(), cs, call.Argument(2)); err != nil {
			// The caller's writer failed: stop the function.
			rt.Interrupt(err)
		}
		return goja.Undefined()
	})
	set("evalModule", func(src, id string) goja.Value {
		prog, err := e.module(src)
		if err != nil {
			panic(rt.NewGoError(err))
		}
		f, err := rt.RunProgram(prog)
		if err != nil {
			panic(err)
		}
		return f
	})
	if err != nil {
		return nil, err
	}
	if _, err := initFn(goja.Undefined(), rt.GlobalObject(), v.host); err != nil {
		return nil, fmt.Errorf("couchjs: prelude: %w", err)
	}
	lock, err := rt.RunProgram(e.lockdown)
	if err != nil {
		return nil, fmt.Errorf("couchjs: lockdown: %w", err)
	}
	lockFn, _ := goja.AssertFunction(lock)
	if _, err := lockFn(goja.Undefined(), rt.GlobalObject()); err != nil {
		return nil, fmt.Errorf("couchjs: lockdown: %w", err)
	}
	for name, dst := range map[string]*goja.Callable{
		"mapDoc": &v.mapDoc, "reduce": &v.reduce, "validate": &v.validate, "filter": &v.filter,
		"show": &v.show, "list": &v.list, "update": &v.update, "makeRequire": &v.makeRequire,
		"stringify": &v.stringify, "parse": &v.parse,
	} {
		f, ok := goja.AssertFunction(v.host.Get(name))
		if !ok {
			return nil, fmt.Errorf("couchjs: prelude has no %s", name)
		}
		*dst = f
	}
	return v, nil
}

// function returns the user's function of c, with require bound to req
// (nil: none). The function value is cached in the runtime when req is
// none or the runtime's design doc's.
func (v *vm) function(c *compiled, req goja.Value) (goja.Value, error) {
	cache := v.fns
	if req != nil {
		cache = nil
		if v.ddocReq != nil && req == v.ddocReq {
			cache = v.ddocFns
		}
	}
	if f, ok := cache[c.prog]; ok {
		return f, nil
	}
	factory, err := v.rt.RunProgram(c.prog)
	if err != nil {
		return nil, v.compileErr(err, c.src)
	}
	ff, _ := goja.AssertFunction(factory)
	if req == nil {
		req = goja.Undefined()
	}
	f, err := ff(goja.Undefined(), req)
	if err != nil {
		return nil, v.compileErr(err, c.src)
	}
	if _, ok := goja.AssertFunction(f); !ok {
		return nil, &Error{Code: "compilation_error", Reason: "Expression does not eval to a function. (" + c.src + ")"}
	}
	if cache != nil {
		if len(cache) >= maxCachedFns {
			clear(cache)
		}
		cache[c.prog] = f
	}
	return f, nil
}

// compileErr is couchjs's answer for a source whose top level throws.
func (v *vm) compileErr(err error, src string) error {
	var ex *goja.Exception
	if errors.As(err, &ex) && !isUncatchable(err) {
		return &Error{Code: "compilation_error", Reason: v.errstr(ex.Value()) + " (" + src + ")"}
	}
	return v.exception(err)
}

func isUncatchable(err error) bool {
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	return errors.As(err, &ie) || errors.As(err, &so)
}

func (v *vm) errstr(val goja.Value) string {
	f, _ := goja.AssertFunction(v.host.Get("errstr"))
	s, err := f(goja.Undefined(), val)
	if err != nil {
		return val.String()
	}
	return s.String()
}

// exception turns what a runner threw into couchjs's answer for it (its
// main loop's handleError): ["error"|"fatal", code, reason] and
// {error, reason} as they are; an Error object as its name with the
// reason CouchDB shows for it ("{[]}": the object's empty JSON as the
// Erlang side prints it); anything else unnamed_error.
func (v *vm) exception(err error) error {
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if e, ok := ie.Value().(error); ok {
			return e
		}
		return err
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		return &Error{Code: "InternalError", Reason: "too much recursion"}
	}
	var ex *goja.Exception
	if !errors.As(err, &ex) {
		return err
	}
	return v.thrown(ex.Value())
}

// thrown is exception for a thrown value.
func (v *vm) thrown(val goja.Value) error {
	obj, ok := val.(*goja.Object)
	if !ok || obj == nil {
		return &Error{Code: "unnamed_error", Reason: v.errstr(val)}
	}
	str := func(x goja.Value) string {
		if x == nil {
			return ""
		}
		if s, ok := x.Export().(string); ok {
			return s
		}
		if b, err := v.stringify(goja.Undefined(), x); err == nil && !goja.IsUndefined(b) {
			return b.String()
		}
		return x.String()
	}
	if obj.ClassName() == "Array" {
		kind := obj.Get("0")
		if kind != nil && (kind.String() == "error" || kind.String() == "fatal") {
			return &Error{Code: str(obj.Get("1")), Reason: str(obj.Get("2"))}
		}
	}
	if e, r := obj.Get("error"), obj.Get("reason"); e != nil && r != nil && e.ToBoolean() && r.ToBoolean() {
		return &Error{Code: str(e), Reason: str(r)}
	}
	if name := obj.Get("name"); name != nil && name.ToBoolean() {
		reason := str(obj)
		if reason == "{}" {
			reason = "{[]}"
		}
		return &Error{Code: name.String(), Reason: reason}
	}
	return &Error{Code: "unnamed_error", Reason: v.errstr(val)}
}
