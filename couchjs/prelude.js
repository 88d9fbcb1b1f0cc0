// The sandbox of every runtime, as couchjs's share/server/*.js sets it up:
// the names a design-doc function sees (emit, sum, log, toJSON, isArray,
// JSON, provides, registerType, start, send, getRow) and the runners the Go
// side calls (host.mapDoc, host.reduce, host.validate, host.filter,
// host.show, host.list, host.update). Written for settee; the behaviour,
// down to quirks such as mime matching's string sort, follows couchjs.
//
// Evaluates to a function(global, host); host carries the Go callbacks
// log(string), nextRow() (a row's JSON, or null at the end) and
// chunks(label, [string], startResp or undefined).
(function (g, host) {
  "use strict";
  var stringify = JSON.stringify;
  var objToString = Object.prototype.toString;

  // --- SpiderMonkey's toSource, which couchjs's errstr() prints ---------
  var ident = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  function lineOf(e) {
    var m = /:(\d+):\d+/.exec(String(e.stack || ""));
    return m ? Number(m[1]) : 0;
  }
  function toSource(v, seen) {
    switch (typeof v) {
      case "undefined": return "(void 0)";
      case "string": return stringify(v);
      case "number": case "boolean": return String(v);
      case "function": return String(v);
    }
    if (v === null) return "null";
    seen = seen || [];
    if (seen.indexOf(v) >= 0) return "{}";
    seen.push(v);
    try {
      if ("stack" in v && "name" in v && "message" in v) {
        return "(new " + v.name + "(" + stringify(String(v.message)) + ", \"<unknown>\", " + lineOf(v) + "))";
      }
      if (Array.isArray(v)) {
        var parts = [];
        for (var i = 0; i < v.length; i++) parts.push(toSource(v[i], seen));
        return "[" + parts.join(", ") + "]";
      }
      var kv = [];
      var ks = Object.keys(v);
      for (var j = 0; j < ks.length; j++) {
        var k = ks[j];
        kv.push((ident.test(k) ? k : stringify(k)) + ":" + toSource(v[k], seen));
      }
      return "({" + kv.join(", ") + "})";
    } finally {
      seen.pop();
    }
  }
  function errstr(e) {
    // A primitive's toSource in SpiderMonkey boxes it.
    switch (typeof e) {
      case "string": return "(new String(" + stringify(e) + "))";
      case "number": return "(new Number(" + e + "))";
      case "boolean": return "(new Boolean(" + e + "))";
    }
    return toSource(e);
  }
  host.errstr = errstr;

  // An Error object stringifies as {} in modern engines; couchjs keeps its
  // name and message where it passes errors on (emit values, log).
  function errorToJSON(e) {
    if (typeof e === "object" && e !== null && "stack" in e && "name" in e && "message" in e) {
      return { error: e.name, message: e.message };
    }
    return e;
  }

  function log(message) {
    if (typeof message !== "string") message = stringify(errorToJSON(message));
    host.log(String(message));
  }

  function isArray(obj) {
    return Array.isArray(obj) || objToString.call(obj) === "[object Array]";
  }

  // --- views ------------------------------------------------------------
  var mapResults = [];
  function emit(key, value) {
    mapResults.push([key, errorToJSON(value)]);
  }
  function sum(values) {
    var rv = 0;
    for (var i in values) rv += values[i];
    return rv;
  }

  function viewError(err, doc) {
    if (err === "fatal_error") {
      throw ["error", "map_runtime_error", "function raised 'fatal_error'"];
    }
    if (err !== null && err !== undefined && err[0] === "fatal") throw err;
    var message = "function raised exception " + errstr(err);
    if (doc) message += " with doc._id " + doc._id;
    log(message);
  }

  // mapDoc answers, per function, null when it threw (couchjs skips the
  // doc for that view) or its emits as [keyJSON, valueJSON] pairs; a
  // stringify failure (a cyclic value) fails the whole doc, as couchjs's
  // print(JSON.stringify(buf)) does.
  host.mapDoc = function (fns, doc) {
    var out = new Array(fns.length);
    for (var i = 0; i < fns.length; i++) {
      mapResults = [];
      try {
        fns[i](doc);
        out[i] = mapResults;
      } catch (e) {
        viewError(e, doc);
        out[i] = null;
      }
    }
    mapResults = [];
    for (var f = 0; f < out.length; f++) {
      var kvs = out[f];
      if (kvs === null) continue;
      for (var j = 0; j < kvs.length; j++) {
        // Array context, as couchjs stringifies the whole buffer:
        // undefined, functions and NaN become null.
        var s = stringify(kvs[j]);
        kvs[j] = s;
      }
    }
    return out;
  };

  host.reduce = function (fn, keys, values, rereduce) {
    var r;
    try {
      r = fn(keys, values, rereduce);
    } catch (e) {
      viewError(e);
      r = null;
    }
    var s = stringify([r]);
    return s.slice(1, s.length - 1);
  };

  // --- validate_doc_update and filters ----------------------------------
  host.validate = function (fn, ddoc, args) {
    try {
      fn.apply(ddoc, args);
      return 1;
    } catch (e) {
      if (e && e.name && e.stack) throw e;
      return e;
    }
  };

  host.filter = function (fn, ddoc, docs, req) {
    var results = [];
    for (var i = 0; i < docs.length; i++) {
      results.push((fn.apply(ddoc, [docs[i], req]) && true) || false);
    }
    return results;
  };

  // --- mime types and provides() ----------------------------------------
  var mimesByKey = {};
  var keysByMime = {};
  function registerType() {
    var key = arguments[0], mimes = [];
    for (var i = 1; i < arguments.length; i++) mimes.push(arguments[i]);
    mimesByKey[key] = mimes;
    for (var j = 0; j < mimes.length; j++) keysByMime[mimes[j]] = key;
  }
  registerType("all", "*/*");
  registerType("text", "text/plain; charset=utf-8", "txt");
  registerType("html", "text/html; charset=utf-8");
  registerType("xhtml", "application/xhtml+xml", "xhtml");
  registerType("xml", "application/xml", "text/xml", "application/x-xml");
  registerType("js", "text/javascript", "application/javascript", "application/x-javascript");
  registerType("css", "text/css");
  registerType("ics", "text/calendar");
  registerType("csv", "text/csv");
  registerType("rss", "application/rss+xml");
  registerType("atom", "application/atom+xml");
  registerType("yaml", "application/x-yaml", "text/yaml");
  registerType("multipart_form", "multipart/form-data");
  registerType("url_encoded_form", "application/x-www-form-urlencoded");
  registerType("json", "application/json", "text/x-json");
  // The built-in types, restored by resetMimes: a user's registerType lasts
  // one call here (couchjs keeps it for the process's life, which a user
  // cannot rely on either: processes come and go).
  var builtinMimes = JSON.parse(stringify([mimesByKey, keysByMime]));
  function resetMimes() {
    var c = JSON.parse(stringify(builtinMimes));
    mimesByKey = c[0];
    keysByMime = c[1];
  }

  function trim(s) { return s.replace(/^\s+/, "").replace(/\s+$/, ""); }
  function parseMimeType(mimeType) {
    var parts = mimeType.split(";"), params = {};
    for (var i = 0; i < parts.length; i++) {
      var p = parts[i].split("=");
      if (p.length === 2) params[trim(p[0])] = trim(p[1]);
    }
    var full = trim(parts[0]);
    if (full === "*") full = "*/*";
    var tp = full.split("/");
    return [tp[0], tp[1], params];
  }
  function parseMediaRange(range) {
    var t = parseMimeType(range), q = t[2].q;
    if (!q) {
      t[2].q = "1";
    } else {
      var f = parseFloat(q);
      if (isNaN(f) || f > 1 || f < 0) t[2].q = "1";
    }
    return t;
  }
  function fitnessAndQuality(mimeType, ranges) {
    var bestFitness = -1, bestQ = 0, target = parseMediaRange(mimeType);
    for (var i = 0; i < ranges.length; i++) {
      var r = ranges[i];
      if ((r[0] == target[0] || r[0] == "*" || target[0] == "*") &&
          (r[1] == target[1] || r[1] == "*" || target[1] == "*")) {
        var matches = 0;
        for (var param in target[2]) {
          if (param != "q" && r[2][param] && r[2][param] == target[2][param]) matches++;
        }
        var fitness = (r[0] == target[0] ? 100 : 0) + (r[1] == target[1] ? 10 : 0) + matches;
        if (fitness > bestFitness) {
          bestFitness = fitness;
          bestQ = r[2].q;
        }
      }
    }
    return [bestFitness, parseFloat(bestQ)];
  }
  function bestMatch(supported, header) {
    var ranges = header.split(",").map(parseMediaRange);
    var weighted = [];
    for (var i = 0; i < supported.length; i++) {
      weighted.push([fitnessAndQuality(supported[i], ranges), i, supported[i]]);
    }
    // The default, string-wise sort: what couchjs's mimeparse does.
    weighted.sort();
    var best = weighted[weighted.length - 1];
    return best[0][1] ? best[2] : "";
  }

  var providesUsed = false, mimeFuns = [], responseContentType = null;
  function provides(type, fun) {
    providesUsed = true;
    mimeFuns.push([type, fun]);
  }
  function resetProvides() {
    providesUsed = false;
    mimeFuns = [];
    responseContentType = null;
  }
  function runProvides(req, ddoc) {
    var supported = [], bestFun, bestKey = null, accept = req.headers && req.headers["Accept"];
    if (req.query && req.query.format) {
      bestKey = req.query.format;
      responseContentType = mimesByKey[bestKey][0];
    } else if (accept) {
      mimeFuns.reverse().forEach(function (mf) {
        if (mimesByKey[mf[0]]) supported = supported.concat(mimesByKey[mf[0]]);
      });
      responseContentType = bestMatch(supported, accept);
      bestKey = keysByMime[responseContentType];
    } else {
      bestKey = mimeFuns[0][0];
      responseContentType = mimesByKey[bestKey][0];
    }
    if (bestKey) {
      for (var i = 0; i < mimeFuns.length; i++) {
        if (mimeFuns[i][0] == bestKey) {
          bestFun = mimeFuns[i][1];
          break;
        }
      }
    }
    if (bestFun) return bestFun.call(ddoc);
    var types = mimeFuns.map(function (mf) {
      return mimesByKey[mf[0]].join(", ") || mf[0];
    });
    throw ["error", "not_acceptable",
      "Content-Type " + (accept || bestKey) + " not supported, try one of: " + types.join(", ")];
  }

  // --- shows, lists, updates --------------------------------------------
  var newHeader = false, chunks = [], startResp = {}, gotRow = false, lastRow = false;
  function resetList() {
    gotRow = false;
    lastRow = false;
    chunks = [];
    startResp = {};
    newHeader = false;
  }
  function start(resp) {
    startResp = resp || {};
    newHeader = true;
  }
  function send(chunk) {
    chunks.push(chunk.toString());
  }
  function applyContentType(resp, type) {
    resp.headers = resp.headers || {};
    if (type) resp.headers["Content-Type"] = resp.headers["Content-Type"] || type;
    return resp;
  }
  function sendStart() {
    startResp = applyContentType(startResp || {}, responseContentType);
    host.chunks("start", chunks, startResp);
    chunks = [];
    startResp = {};
    newHeader = false;
  }
  function blowChunks(label) {
    if (newHeader) {
      host.chunks(label || "chunks", chunks, startResp);
      newHeader = false;
    } else {
      host.chunks(label || "chunks", chunks);
    }
    chunks = [];
  }
  function getRow() {
    if (lastRow) return null;
    if (!gotRow) {
      gotRow = true;
      sendStart();
    } else {
      blowChunks();
    }
    var row = host.nextRow();
    if (row === null) {
      lastRow = true;
      return null;
    }
    return JSON.parse(row);
  }

  function wrapResponse(resp) {
    return typeof resp === "string" ? { body: resp } : resp;
  }
  function typeOf(v) {
    var s = typeof v;
    if (s === "object") {
      if (!v) return "null";
      if (v instanceof Array) return "array";
    }
    return s;
  }
  function renderError(e, errType) {
    if ((e && e.error && e.reason) || (e && (e[0] === "error" || e[0] === "fatal"))) throw e;
    var message = "function raised error: " + errstr(e) + " \nstacktrace: " + (e && e.stack);
    log(message);
    throw ["error", errType || "render_error", message];
  }

  host.show = function (fn, ddoc, args) {
    try {
      resetMimes();
      resetList();
      resetProvides();
      var resp = wrapResponse(fn.apply(ddoc, args) || {});
      if (chunks.length > 0) {
        resp.headers = resp.headers || {};
        for (var h in startResp) resp.headers[h] = startResp[h];
        resp.body = chunks.join("") + (resp.body || "");
        resetList();
      }
      if (providesUsed) {
        var provided = wrapResponse(runProvides(args[1], ddoc) || {});
        resp.body = (resp.body || "") + chunks.join("");
        resp.body += provided.body || "";
        resp = applyContentType(resp, responseContentType);
        resetList();
      }
      var t = typeOf(resp);
      if (t !== "object" && t !== "string") {
        throw ["error", "render_error", "undefined response from show function"];
      }
      return stringify(wrapResponse(resp));
    } catch (e) {
      if (args[0] === null && args[1] && args[1].path && args[1].path.length > 5) {
        throw ["error", "not_found", "document not found"];
      }
      renderError(e);
    }
  };

  host.update = function (fn, ddoc, args) {
    try {
      resetMimes();
      if (args[1].method == "GET") {
        throw ["error", "method_not_allowed", "Update functions do not allow GET"];
      }
      var result = fn.apply(ddoc, args);
      var doc = result[0], resp = result[1], t = typeOf(resp);
      if (t !== "object" && t !== "string") {
        throw ["error", "render_error", "undefined response from update function"];
      }
      return [doc === undefined || doc === null ? null : stringify(doc), stringify(wrapResponse(resp))];
    } catch (e) {
      renderError(e);
    }
  };

  host.list = function (fn, ddoc, args) {
    try {
      resetMimes();
      resetProvides();
      resetList();
      var tail = fn.apply(ddoc, args);
      if (providesUsed) tail = runProvides(args[1], ddoc);
      if (!gotRow) getRow();
      if (typeof tail !== "undefined") chunks.push(tail);
      blowChunks("end");
    } catch (e) {
      renderError(e);
    }
  };


  // --- require(): CommonJS modules from the design doc ------------------
  function noParent(mod) {
    return ["error", "invalid_require_path", "Object has no parent " + stringify(mod && mod.current)];
  }
  // Built-ins require uses, as they were before any design-doc code ran
  // (that code may change its sandbox's as it likes).
  var freeze = Object.freeze, isFrozen = Object.isFrozen, objectKeys = Object.keys;
  var getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  function ownValue(o, n) {
    if (o === null || typeof o !== "object") return undefined;
    var d = getOwnPropertyDescriptor(o, n);
    return d ? d.value : undefined;
  }
  function resolveModule(names, mod, root) {
    if (names.length === 0) {
      if (typeof mod.current !== "string") {
        throw ["error", "invalid_require_path", "Must require a JavaScript string, not: " + (typeof mod.current)];
      }
      return { current: mod.current, parent: mod.parent, id: mod.id };
    }
    var n = names.shift();
    if (n === "..") {
      if (!(mod && mod.parent && mod.parent.parent)) throw noParent(mod);
      return resolveModule(names, freeze({
        id: mod.id.slice(0, mod.id.lastIndexOf("/")),
        parent: mod.parent.parent,
        current: mod.parent.current
      }));
    } else if (n === ".") {
      if (!(mod && mod.parent)) throw noParent(mod);
      return resolveModule(names, freeze({ parent: mod.parent, current: mod.current, id: mod.id }));
    } else if (root) {
      mod = freeze({ current: root });
    }
    // own members only: an inherited one could be anything code set on
    // Object.prototype
    var next = ownValue(mod.current, n);
    if (next === undefined) {
      throw ["error", "invalid_require_path", "Object has no property \"" + n + "\". " + stringify(mod.current)];
    }
    return resolveModule(names, freeze({ current: next, parent: mod, id: mod.id ? mod.id + "/" + n : n }));
  }
  // makeRequire gives the require of one design doc; cache is its module
  // cache (couchjs keeps it on the ddoc object). ddoc must be a copy of
  // the doc of its own: it is frozen, and the records resolution walks
  // (module.parent...) are frozen or private, so that code cannot make
  // require evaluate a string of its own making (lockdown.js refuses
  // eval and Function; this is the one other way to run a string).
  function deepFreeze(o) {
    if (o === null || typeof o !== "object" || isFrozen(o)) return o;
    freeze(o);
    var ks = objectKeys(o);
    for (var i = 0; i < ks.length; i++) deepFreeze(o[ks[i]]);
    return o;
  }
  host.makeRequire = function (ddoc, cache) {
    deepFreeze(ddoc);
    function require(name, parent) {
      var r = resolveModule(String(name).split("/"), parent && parent.parent, ddoc);
      var m = { current: r.current, parent: r.parent, id: r.id, exports: {} };
      if (getOwnPropertyDescriptor(cache, m.id) === undefined) {
        // An empty exports first stops circular requires recursing.
        cache[m.id] = {};
        var own = freeze({ current: r.current, parent: r.parent, id: r.id });
        try {
          var f = host.evalModule(own.current, own.id);
          f.apply(g, [m, m.exports, function (n) { return require(n, own); }]);
        } catch (e) {
          throw ["error", "compilation_error", "Module require('" + name + "') raised error " + errstr(e)];
        }
        cache[m.id] = m.exports;
      }
      return cache[m.id];
    }
    return function (name) { return require(name); };
  };

  host.stringify = stringify;
  host.parse = JSON.parse;

  g.emit = emit;
  g.sum = sum;
  g.log = log;
  g.toJSON = stringify;
  g.isArray = isArray;
  g.provides = provides;
  g.registerType = registerType;
  g.start = start;
  g.send = send;
  g.getRow = getRow;
})
