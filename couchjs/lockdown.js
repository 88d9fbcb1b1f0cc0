// Run in every runtime after the prelude and before any design-doc code:
// refuses runtime code evaluation as CouchDB's couchjs does (its
// SpiderMonkey context has a content security policy that allows no
// eval): eval(), Function() and new Function(), and the same constructor
// reached through any function's .constructor, generator and async
// functions' included, throw EvalError("call to eval() blocked by CSP") or
// EvalError("call to Function() blocked by CSP"), SpiderMonkey's texts.
// The real constructors are then unreachable: the only references to them
// were these properties. The stand-ins keep the prototypes, so
// `f instanceof Function` holds as before.
(function (g) {
  "use strict";
  var EvalErr = EvalError;
  var defineProperty = Object.defineProperty;
  var getPrototypeOf = Object.getPrototypeOf;
  function blocked(name, what, proto) {
    var f = function () { throw new EvalErr("call to " + what + " blocked by CSP"); };
    defineProperty(f, "name", { value: name });
    defineProperty(f, "length", { value: 1 });
    defineProperty(f, "prototype", { value: proto, writable: false });
    defineProperty(proto, "constructor", { value: f }); // its attributes stay
    return f;
  }
  var F = blocked("Function", "Function()", Function.prototype);
  blocked("GeneratorFunction", "Function()", getPrototypeOf(function* () {}));
  blocked("AsyncFunction", "Function()", getPrototypeOf(async function () {}));
  defineProperty(g, "Function", { value: F, writable: true, enumerable: false, configurable: true });
  var ev = function (x) { throw new EvalErr("call to eval() blocked by CSP"); };
  defineProperty(ev, "name", { value: "eval" });
  defineProperty(g, "eval", { value: ev, writable: true, enumerable: false, configurable: true });
})
