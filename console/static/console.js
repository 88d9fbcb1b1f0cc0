// settee console: the live parts (active tasks, replication states, the
// graphs). Plain DOM; data is only ever put into the page as text.
(function () {
  "use strict";

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) { for (var k in attrs) { e.setAttribute(k, attrs[k]); } }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function getJSON(path) {
    return fetch(path, { credentials: "same-origin", headers: { "Accept": "application/json" } }).then(function (r) {
      return r.text().then(function (t) {
        var body = null;
        try { body = JSON.parse(t); } catch (e) { body = null; }
        return { status: r.status, ok: r.ok, body: body };
      });
    });
  }
  function apiError(res) {
    var b = res.body || {};
    return res.status + (b.error ? " " + b.error : "") + (b.reason ? ": " + b.reason : "");
  }
  function progressCell(td, pct) {
    td.textContent = "";
    if (pct < 0) { td.textContent = "—"; return; }
    var p = el("progress", { max: "100", value: String(pct) }, pct + "%");
    td.appendChild(p);
    td.appendChild(document.createTextNode(" " + pct + "%"));
  }
  function dash(v) { return v === undefined || v === null ? "–" : v; }

  // --- active tasks -----------------------------------------------------
  function taskRow(t) {
    var what = t.database || "", detail = "", pct = -1;
    if (t.type === "replication") {
      what = (t.source || "") + " → " + (t.target || "");
      var read = t.docs_read || 0, pend = t.changes_pending;
      if (typeof pend === "number" && read + pend > 0) { pct = Math.floor(100 * read / (read + pend)); }
      detail = dash(t.docs_read) + " docs read, " + dash(t.docs_written) + " written, " + dash(t.changes_pending) + " pending";
    } else if (t.type === "indexer" || t.type === "view_compaction") {
      what = (t.database || "") + " " + (t.design_document || "");
    }
    if (typeof t.progress === "number") { pct = Math.floor(t.progress); }
    if (!detail && t.changes_done !== undefined) { detail = t.changes_done + " of " + dash(t.total_changes) + " changes"; }
    var tr = el("tr");
    tr.appendChild(el("td", null, t.type));
    tr.appendChild(el("td", null, what));
    tr.appendChild(el("td", null, t.node || ""));
    var td = el("td"); progressCell(td, pct); tr.appendChild(td);
    tr.appendChild(el("td", null, detail));
    return tr;
  }
  function pollTasks(table) {
    var status = document.getElementById("tasks-status");
    var tbody = table.tBodies[0];
    function tick() {
      getJSON(table.getAttribute("data-poll")).then(function (res) {
        if (!res.ok || !Array.isArray(res.body)) { status.textContent = "Update failed: " + apiError(res); return; }
        tbody.textContent = "";
        if (res.body.length === 0) {
          var tr = el("tr"); tr.appendChild(el("td", { colspan: "5" }, "No active tasks.")); tbody.appendChild(tr);
        }
        res.body.forEach(function (t) { tbody.appendChild(taskRow(t)); });
        status.textContent = "Last update " + new Date().toLocaleTimeString() + ".";
      }).catch(function (e) { status.textContent = "Update failed: " + e; })
        .then(function () { setTimeout(tick, 2000); });
    }
    setTimeout(tick, 2000);
  }

  // --- replication states --------------------------------------------
  // endpointName is a source or target as the page shows it (admin.go's
  // endpointName): the URL, its password hidden.
  function endpointName(v) {
    var s = v && typeof v === "object" ? String(v.url || "") : String(v === undefined || v === null ? "" : v);
    return s.replace(/^([a-z][a-z0-9+.-]*:\/\/[^\/@:]*):[^\/@]*@/i, "$1:*****@");
  }
  // repRow is a row like the page's own for a replication doc it did not
  // list: one the scheduler learnt of after the page was made (a doc just
  // created by the form above is often one).
  function repRow(d) {
    var tr = el("tr", { "data-doc": d.doc_id });
    tr.appendChild(el("td", null, d.doc_id));
    tr.appendChild(el("td", null, endpointName(d.source) + " → " + endpointName(d.target)));
    tr.appendChild(el("td", { "class": "state" }));
    tr.appendChild(el("td", { "class": "progress" }));
    tr.appendChild(el("td", { "class": "written" }));
    tr.appendChild(el("td", { "class": "errors" }));
    var csrf = document.querySelector('input[name="csrf"]');
    var td = el("td");
    if (csrf) {
      var f = el("form", { "class": "inline", method: "post", action: "/_utils/replication/cancel" });
      f.appendChild(el("input", { type: "hidden", name: "csrf", value: csrf.value }));
      f.appendChild(el("input", { type: "hidden", name: "doc_id", value: d.doc_id }));
      var b = el("button", { type: "submit", "class": "danger" }, "Cancel");
      b.appendChild(el("span", { "class": "sr" }, " " + d.doc_id));
      f.appendChild(b);
      td.appendChild(f);
    }
    tr.appendChild(td);
    return tr;
  }
  function pollReplication(table) {
    var tbody = table.tBodies[0];
    function tick() {
      getJSON(table.getAttribute("data-poll")).then(function (res) {
        if (!res.ok || !res.body || !Array.isArray(res.body.docs)) { return; }
        res.body.docs.forEach(function (d) {
          if (typeof d.doc_id !== "string") { return; }
          var tr = null, rows = tbody.rows;
          for (var i = 0; i < rows.length && !tr; i++) {
            if (rows[i].getAttribute("data-doc") === d.doc_id) { tr = rows[i]; }
          }
          if (!tr) {
            // "No replication documents." goes with the first row
            Array.prototype.slice.call(rows).forEach(function (r) { if (!r.hasAttribute("data-doc")) { tbody.removeChild(r); } });
            tr = tbody.appendChild(repRow(d));
          }
          var info = d.info || {};
          var st = tr.querySelector(".state");
          st.textContent = d.state || "";
          st.className = "state state-" + (d.state || "");
          var pct = -1;
          if (d.state === "completed") { pct = 100; } else if (typeof info.changes_pending === "number" && (info.docs_read || 0) + info.changes_pending > 0) {
            pct = Math.floor(100 * (info.docs_read || 0) / ((info.docs_read || 0) + info.changes_pending));
          }
          progressCell(tr.querySelector(".progress"), pct);
          tr.querySelector(".written").textContent = info.docs_written === undefined ? "" : String(info.docs_written);
          var errs = tr.querySelector(".errors");
          errs.textContent = String(d.error_count || 0);
          if (info.error) { errs.appendChild(document.createTextNode(" ")); errs.appendChild(el("span", { "class": "bad" }, typeof info.error === "string" ? info.error : JSON.stringify(info.error))); }
        });
      }).catch(function () {}).then(function () { setTimeout(tick, 2000); });
    }
    setTimeout(tick, 2000);
  }

  // --- graphs ----------------------------------------------------------
  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    return e;
  }
  function fmtNum(v) {
    if (v === 0) { return "0"; }
    var a = Math.abs(v);
    if (a >= 1e9) { return (v / 1e9).toFixed(1) + "G"; }
    if (a >= 1e6) { return (v / 1e6).toFixed(1) + "M"; }
    if (a >= 1e3) { return (v / 1e3).toFixed(1) + "k"; }
    if (a >= 10) { return v.toFixed(0); }
    return v.toFixed(a >= 1 ? 1 : 2);
  }
  function fmtBytes(v) {
    var u = ["B", "KB", "MB", "GB", "TB"], i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + u[i];
  }
  function hhmmss(t) { return new Date(t).toLocaleTimeString(); }

  // charts: [title, function(samples) -> [{name, values}], formatter]
  var charts = [
    ["Requests/s by method and status", function (ss) {
      var names = {};
      ss.forEach(function (s) { for (var k in (s.requests_per_sec || {})) { names[k] = true; } });
      return Object.keys(names).sort().map(function (n) {
        return { name: n, values: ss.map(function (s) { return (s.requests_per_sec || {})[n] || 0; }) };
      });
    }, fmtNum],
    ["Latency (ms)", function (ss) {
      return [{ name: "p50", values: ss.map(function (s) { return s.latency_p50_ms || 0; }) },
              { name: "p99", values: ss.map(function (s) { return s.latency_p99_ms || 0; }) }];
    }, fmtNum],
    ["Documents/s", function (ss) {
      return [{ name: "written", values: ss.map(function (s) { return s.docs_written_per_sec || 0; }) },
              { name: "read", values: ss.map(function (s) { return s.docs_read_per_sec || 0; }) }];
    }, fmtNum],
    ["Replication docs/s", function (ss) {
      return [{ name: "docs/s", values: ss.map(function (s) { return s.replication_docs_per_sec || 0; }) }];
    }, fmtNum],
    ["Compaction MB/s", function (ss) {
      return [{ name: "copied MB/s", values: ss.map(function (s) { return s.compaction_mb_per_sec || 0; }) },
        { name: "reclaimed MB/s", values: ss.map(function (s) { return s.compaction_reclaimed_mb_per_sec || 0; }) }];
    }, fmtNum],
    ["Disk", function (ss) {
      return [{ name: "disk bytes", values: ss.map(function (s) { return s.disk_bytes || 0; }) }];
    }, fmtBytes],
    ["Memory (RSS)", function (ss) {
      return [{ name: "rss bytes", values: ss.map(function (s) { return s.rss_bytes || 0; }) }];
    }, fmtBytes]
  ];

  function drawChart(box, title, series, fmt, ts, windowMs) {
    box.textContent = "";
    box.appendChild(el("h3", null, title));
    var W = 400, H = 140, L = 62, R = 6, T = 6, B = 18;
    var s = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": title });
    var max = 0;
    series.forEach(function (se) { se.values.forEach(function (v) { if (v > max) { max = v; } }); });
    if (max <= 0) { max = 1; }
    // the time axis spans the samples there are (at least a minute, at
    // most the window), so a young history is not a sliver at the right
    var tEnd = ts.length ? ts[ts.length - 1] : Date.now();
    var span = ts.length ? Math.min(windowMs, Math.max(20000, tEnd - ts[0])) : windowMs, tStart = tEnd - span;
    function x(t) { return L + (W - L - R) * (t - tStart) / span; }
    function y(v) { return T + (H - T - B) * (1 - v / max); }
    s.appendChild(svg("line", { x1: L, y1: T, x2: L, y2: H - B, "class": "axis" }));
    s.appendChild(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, "class": "axis" }));
    s.appendChild(svg("line", { x1: L, y1: T, x2: W - R, y2: T, "class": "axis" }));
    var tmax = svg("text", { x: L - 4, y: T + 9, "text-anchor": "end" }); tmax.textContent = fmt(max); s.appendChild(tmax);
    var t0 = svg("text", { x: L - 4, y: H - B, "text-anchor": "end" }); t0.textContent = "0"; s.appendChild(t0);
    var xl = svg("text", { x: L, y: H - 4 }); xl.textContent = hhmmss(tStart); s.appendChild(xl);
    var xr = svg("text", { x: W - R, y: H - 4, "text-anchor": "end" }); xr.textContent = hhmmss(tEnd); s.appendChild(xr);
    var legend = el("ul", { "class": "legend" });
    series.forEach(function (se, i) {
      var pts = [];
      for (var j = 0; j < se.values.length; j++) { pts.push(x(ts[j]).toFixed(1) + "," + y(se.values[j]).toFixed(1)); }
      var cls = "s" + (i % 8);
      if (pts.length === 1) {
        // one sample is a point, not a line: a dot, so a young history shows
        var xy = pts[0].split(",");
        s.appendChild(svg("circle", { cx: xy[0], cy: xy[1], r: 2.5, "class": cls + " dot" }));
      } else if (pts.length) { s.appendChild(svg("polyline", { points: pts.join(" "), "class": cls })); }
      var last = se.values.length ? se.values[se.values.length - 1] : 0;
      legend.appendChild(el("li", { "class": cls }, se.name + " " + fmt(last)));
    });
    box.appendChild(s);
    if (!series.length) { legend.appendChild(el("li", null, "nothing yet")); }
    box.appendChild(legend);
  }

  function graphNode(sec) {
    var node = sec.getAttribute("data-node");
    var status = sec.querySelector(".status"), wrap = sec.querySelector(".charts");
    var samples = [], last = 0, interval = 5, windowS = 900;
    var boxes = charts.map(function () { var d = el("div", { "class": "chart" }); wrap.appendChild(d); return d; });
    function draw() {
      var ts = samples.map(function (s) { return s.t; });
      charts.forEach(function (c, i) { drawChart(boxes[i], c[0], c[1](samples), c[2], ts, windowS * 1000); });
    }
    function tick() {
      var path = "/_node/" + encodeURIComponent(node) + "/_history" + (last ? "?since=" + last : "");
      getJSON(path).then(function (res) {
        if (res.status === 404) { status.textContent = "No history on this node."; wrap.hidden = true; return; }
        if (!res.ok || !res.body) {
          status.textContent = "Could not read the history: " + apiError(res);
          wrap.hidden = samples.length === 0;
          return;
        }
        wrap.hidden = false;
        interval = res.body.interval_seconds || interval;
        windowS = res.body.window_seconds || windowS;
        (res.body.samples || []).forEach(function (s) { if (s.t > last) { samples.push(s); last = s.t; } });
        var cut = last - windowS * 1000;
        while (samples.length && samples[0].t < cut) { samples.shift(); }
        status.textContent = samples.length + (samples.length === 1 ? " sample" : " samples") + ", one every " + interval + " s; last " + (last ? hhmmss(last) : "–") + ".";
        draw();
      }).catch(function (e) { status.textContent = "Could not read the history: " + e; wrap.hidden = samples.length === 0; })
        .then(function () { setTimeout(tick, Math.max(1, interval) * 1000); });
    }
    tick();
  }

  var t = document.getElementById("tasks");
  if (t && t.getAttribute("data-poll")) { pollTasks(t); }
  var rd = document.getElementById("repdocs");
  if (rd) { pollReplication(rd); }
  var gs = document.querySelectorAll(".node-graphs");
  for (var i = 0; i < gs.length; i++) { graphNode(gs[i]); }
})();
