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

  // SpiderMonkey's longest string (JSString::MAX_LENGTH): repeat,
  // padStart and padEnd past it throw its RangeError before anything is
  // allocated, as in couchjs, where goja would first try to allocate the
  // whole result at once (the worker's memory bound would stop it, but
  // as a dead worker, not as the function's own error). The arguments
  // are converted once, in the specification's order, and the built-in
  // gets the converted values.
  var MAX_LENGTH = 1073741822;
  var RangeErr = RangeError, Str = String, apply = Reflect.apply, SP = String.prototype;
  var tooLong = "repeat count must be less than infinity and not overflow maximum string size";
  function toLength(x) {
    var n = +x;
    if (n !== n || n <= 0) return 0;
    return n === Infinity ? 9007199254740991 : Math.min(Math.floor(n), 9007199254740991);
  }
  function install(name, f, length) {
    defineProperty(f, "name", { value: name });
    defineProperty(f, "length", { value: length });
    defineProperty(SP, name, { value: f, writable: true, enumerable: false, configurable: true });
  }
  var repeat = SP.repeat;
  install("repeat", function (count) {
    if (this === null || this === undefined) return apply(repeat, this, []);
    var s = Str(this), n = +count;
    if (s.length > 0 && n > 0 && n !== Infinity && s.length * Math.floor(n) > MAX_LENGTH) throw new RangeErr(tooLong);
    return apply(repeat, s, [n]);
  }, 1);
  function pad(name) {
    var orig = SP[name];
    install(name, function (maxLength, fillString) {
      if (this === null || this === undefined) return apply(orig, this, []);
      var s = Str(this), n = toLength(maxLength);
      var fill = fillString === undefined ? " " : Str(fillString);
      if (n > MAX_LENGTH && n > s.length && fill !== "") throw new RangeErr(tooLong);
      return apply(orig, s, [n, fill]);
    }, 1);
  }
  pad("padStart");
  pad("padEnd");
})
