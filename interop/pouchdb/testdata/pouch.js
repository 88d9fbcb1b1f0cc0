// PouchDB 9 against a CouchDB-compatible server: one scenario per run.
//
//   node pouch.js <scenario> <server URL with credentials> <database>
//
// The scenario prints one JSON object on stdout (what PouchDB saw) and
// exits 0; any error is printed on stderr and the exit status is 1. A run
// that is still going after LIMIT_MS exits 2 by itself. The Go test
// (pouchdb_test.go) reads the JSON and checks the server's side over HTTP.
'use strict';

const PouchDB = require('pouchdb-core')
  .plugin(require('pouchdb-adapter-http'))
  .plugin(require('pouchdb-adapter-memory'))
  .plugin(require('pouchdb-replication'));

const LIMIT_MS = 25000;
setTimeout(() => {
  process.stderr.write(`pouch.js: still running after ${LIMIT_MS} ms, giving up\n`);
  process.exit(2);
}, LIMIT_MS).unref();

const [scenario, server, dbname] = process.argv.slice(2);
if (!scenario || !server || !dbname) {
  process.stderr.write('usage: node pouch.js <scenario> <url> <db>\n');
  process.exit(1);
}
const remoteURL = server.replace(/\/+$/, '') + '/' + encodeURIComponent(dbname);

// The same bytes as binaryBytes in pouchdb_test.go.
function binaryBytes(n) {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + (i >> 8)) & 255;
  return b;
}
const TEXT = 'hello, settee\nsecond line: ünïcødé ✓\n';
const b64 = (s) => Buffer.from(s).toString('base64');

function remoteDB() {
  return new PouchDB(remoteURL, { skip_setup: true });
}
let localN = 0;
function localDB() {
  return new PouchDB(`local-${scenario}-${localN++}`, { adapter: 'memory' });
}

// What a replication reports, without its timings.
function rep(r) {
  return {
    ok: r.ok,
    status: r.status,
    docs_read: r.docs_read,
    docs_written: r.docs_written,
    doc_write_failures: r.doc_write_failures,
    errors: (r.errors || []).map(String),
    last_seq: r.last_seq,
  };
}

// A doc as a user reads it back, or its error.
async function read(db, id, opts) {
  try {
    return await db.get(id, Object.assign({ conflicts: true, attachments: true }, opts || {}));
  } catch (e) {
    return { _error: { status: e.status, name: e.name, reason: e.reason || e.message } };
  }
}

// Every doc of db with its leaves (deleted ones too), from its changes feed.
async function leaves(db) {
  const ch = await db.changes({ since: 0, style: 'all_docs' });
  const out = {};
  for (const r of ch.results) {
    out[r.id] = { deleted: !!r.deleted, revs: r.changes.map((c) => c.rev).sort() };
  }
  return out;
}

// Records the since of every changes feed db opens (replication's reads).
function spySince(db) {
  const sinces = [];
  const orig = db.changes.bind(db);
  db.changes = (opts) => {
    sinces.push(opts && opts.since !== undefined ? String(opts.since) : null);
    return orig(opts);
  };
  return sinces;
}

function waitFor(what, fn, ms) {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + ms;
    const tick = async () => {
      let v;
      try {
        v = await fn();
      } catch (e) {
        v = undefined;
      }
      if (v) return resolve(v);
      if (Date.now() > deadline) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(tick, 50);
    };
    tick();
  });
}

// Writes the docs of the push scenario into db and returns their ids.
async function pushDocs(db) {
  await db.bulkDocs([
    { _id: 'plain', n: 1, tags: ['a', 'b'], nested: { x: null, y: 1.5 } },
    {
      _id: 'text-att',
      title: 'text',
      _attachments: { 'hello.txt': { content_type: 'text/plain', data: b64(TEXT) } },
    },
    {
      _id: 'bin-att',
      _attachments: {
        'blob.bin': { content_type: 'application/octet-stream', data: binaryBytes(20000).toString('base64') },
        'small.bin': { content_type: 'image/png', data: binaryBytes(3).toString('base64') },
      },
    },
    { _id: '_design/app', views: { by_n: { map: 'function (doc) { emit(doc.n); }' } } },
  ]);
  // an edit that keeps the attachment as a stub
  const t = await db.get('text-att');
  t.title = 'text, edited';
  await db.put(t);
  // three revisions
  let e = await db.put({ _id: 'edited', v: 1 });
  e = await db.put({ _id: 'edited', _rev: e.rev, v: 2 });
  await db.put({ _id: 'edited', _rev: e.rev, v: 3 });
  // a tombstone
  const g = await db.put({ _id: 'gone', v: 'soon deleted' });
  await db.remove('gone', g.rev);
}

const scenarios = {
  async push() {
    const local = localDB();
    await pushDocs(local);
    const r = await local.replicate.to(remoteDB());
    return { replication: rep(r), local: await leaves(local) };
  },

  async pull() {
    const local = localDB();
    const r = await local.replicate.from(remoteDB());
    const docs = {};
    for (const id of ['p-plain', 'p-att', 'p-gone', 'p-conflict', 'p-delconflict', '_design/p']) {
      docs[id] = await read(local, id);
    }
    const info = await local.info();
    return { replication: rep(r), docs, leaves: await leaves(local), doc_count: info.doc_count };
  },

  async checkpoint() {
    const remote = remoteDB();
    const out = {};
    // pull twice, then once more after a doc was written on the server
    {
      const local = localDB();
      const sinces = spySince(remote);
      const r1 = await local.replicate.from(remote);
      const r2 = await local.replicate.from(remote);
      await remote.put({ _id: 'cp-new-remote', v: 1 });
      const r3 = await local.replicate.from(remote);
      out.pull = { runs: [rep(r1), rep(r2), rep(r3)], sinces: sinces.slice() };
      remote.changes = Object.getPrototypeOf(remote).changes.bind(remote);
    }
    // push twice, then once more after a local write
    {
      const local = localDB();
      await local.bulkDocs([{ _id: 'cp-l1' }, { _id: 'cp-l2' }, { _id: 'cp-l3' }]);
      const sinces = spySince(local);
      const r1 = await local.replicate.to(remote);
      const r2 = await local.replicate.to(remote);
      await local.put({ _id: 'cp-new-local', v: 1 });
      const r3 = await local.replicate.to(remote);
      out.push = { runs: [rep(r1), rep(r2), rep(r3)], sinces: sinces.slice() };
    }
    return out;
  },

  async sync() {
    const local = localDB();
    const remote = remoteDB();
    const out = {};
    // a doc on both sides, then edited on both: a conflict
    await local.put({ _id: 's-doc', v: 'base' });
    await remote.put({ _id: 's-remote-del', v: 'to be deleted locally' });
    await local.put({ _id: 's-local-del', v: 'to be deleted on the server' });
    out.first = rep(await local.sync(remote).then((r) => r.push).catch((e) => { throw e; }));
    const l = await local.get('s-doc');
    const rm = await remote.get('s-doc');
    const lput = await local.put(Object.assign(l, { v: 'local edit' }));
    const rput = await remote.put(Object.assign(rm, { v: 'remote edit' }));
    out.edits = { local: lput.rev, remote: rput.rev };
    // deletes, one on each side
    await local.remove(await local.get('s-remote-del'));
    await remote.remove(await remote.get('s-local-del'));
    const s2 = await local.sync(remote);
    out.second = { push: rep(s2.push), pull: rep(s2.pull) };
    out.conflict = { local: await read(local, 's-doc'), remote: await read(remote, 's-doc') };
    out.deleted = {
      local: { 's-remote-del': await read(local, 's-remote-del'), 's-local-del': await read(local, 's-local-del') },
      remote: { 's-remote-del': await read(remote, 's-remote-del'), 's-local-del': await read(remote, 's-local-del') },
    };
    // resolve: remove the loser locally, sync, both sides have no conflict
    const c = out.conflict.local;
    for (const rev of c._conflicts || []) await local.remove('s-doc', rev);
    const s3 = await local.sync(remote);
    out.resolved = {
      push: rep(s3.push),
      local: await read(local, 's-doc'),
      remote: await read(remote, 's-doc'),
    };
    out.leaves = { local: await leaves(local), remote: await leaves(remote) };
    return out;
  },

  // filtered pulls: doc_ids (filter=_doc_ids) and a Mango selector
  // (filter=_selector); a push with a JavaScript filter runs in PouchDB
  async filtered() {
    const remote = remoteDB();
    const ids = async (db) => (await db.allDocs()).rows.map((r) => r.id).sort();
    const a = localDB();
    const ra = await a.replicate.from(remote, { doc_ids: ['f-1', 'f-3', 'f-missing'] });
    const b = localDB();
    const rb = await b.replicate.from(remote, { selector: { type: 'keep' } });
    const c = localDB();
    await c.bulkDocs([{ _id: 'f-push-yes', up: true }, { _id: 'f-push-no', up: false }]);
    const rc = await c.replicate.to(remote, { filter: (doc) => doc.up === true });
    return {
      doc_ids: { replication: rep(ra), ids: await ids(a) },
      selector: { replication: rep(rb), ids: await ids(b) },
      push_filter: { replication: rep(rc) },
    };
  },

  // many docs in small batches, pushed and pulled back into a fresh db
  async many() {
    const remote = remoteDB();
    const a = localDB();
    const docs = [];
    for (let i = 0; i < 300; i++) docs.push({ _id: 'm-' + String(i).padStart(4, '0'), i });
    await a.bulkDocs(docs);
    const push = await a.replicate.to(remote, { batch_size: 40 });
    const b = localDB();
    const pull = await b.replicate.from(remote, { batch_size: 40, batches_limit: 2 });
    const all = await b.allDocs({ include_docs: true });
    const bad = all.rows.filter((r) => r.doc.i !== Number(r.id.slice(2))).map((r) => r.id);
    return { push: rep(push), pull: rep(pull), count: all.rows.length, bad };
  },

  async live() {
    const local = localDB();
    const remote = remoteDB();
    await local.put({ _id: 'l-before', v: 0 });
    const events = [];
    const h = local.sync(remote, { live: true, retry: true });
    const done = new Promise((resolve, reject) => {
      h.on('complete', (info) => resolve(info));
      h.on('error', (e) => reject(e));
    });
    h.on('change', (c) => events.push({ event: 'change', direction: c.direction, ids: c.change.docs.map((d) => d._id) }));
    h.on('paused', (e) => events.push({ event: 'paused', error: e ? String(e) : null }));
    h.on('active', () => events.push({ event: 'active' }));
    h.on('denied', (e) => events.push({ event: 'denied', error: String(e) }));
    // the first doc reaches the server
    await waitFor('l-before on the server', () => remote.get('l-before'), 10000);
    // a change written straight to the server over HTTP, not by PouchDB
    const u = new URL(remoteURL + '/l-server');
    const auth = 'Basic ' + Buffer.from(decodeURIComponent(u.username) + ':' + decodeURIComponent(u.password)).toString('base64');
    u.username = '';
    u.password = '';
    const res = await fetch(u, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json', Authorization: auth },
      body: JSON.stringify({ v: 'written on the server after the live sync started' }),
    });
    const put = { status: res.status, body: await res.json() };
    const got = await waitFor('l-server in the local db', () => local.get('l-server'), 10000);
    // a delete on the server reaches the local db too
    const del = await fetch(new URL(u.href + '?rev=' + put.body.rev), { method: 'DELETE', headers: { Authorization: auth } });
    const delBody = await del.json();
    const deleted = await waitFor('the delete of l-server in the local db', async () => {
      try {
        await local.get('l-server');
        return false;
      } catch (e) {
        return { status: e.status, reason: e.reason };
      }
    }, 10000);
    // and a local change goes the other way
    await local.put({ _id: 'l-after', v: 2 });
    await waitFor('l-after on the server', () => remote.get('l-after'), 10000);
    h.cancel();
    const info = await done;
    return {
      put,
      got,
      del: { status: del.status, body: delBody },
      deleted,
      complete: { status: info.status || null, push: info.push ? info.push.status : null, pull: info.pull ? info.pull.status : null },
      events,
    };
  },
};

(async () => {
  const fn = scenarios[scenario];
  if (!fn) throw new Error(`no scenario ${scenario}`);
  const out = await fn();
  // exit only once the pipe has taken all of it
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
})().catch((e) => {
  process.stderr.write(`pouch.js ${scenario}: ${e && e.stack ? e.stack : e}\n${e && e.status ? 'status ' + e.status + ' ' + JSON.stringify(e) : ''}\n`);
  process.exit(1);
});
