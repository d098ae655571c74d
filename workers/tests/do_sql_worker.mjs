// The worker thread behind workers/tests/do_sql.mjs: it owns a Miniflare whose workerd runs
// a real SQLite-backed Durable Object class (JavaScript, `SqlObject`), and answers the main
// thread's requests (which block the main thread with Atomics.wait until answered).
//
// Main -> here: {op: "exec"|"size", name, sql?, bindings?} (a statement outside any
// transaction: one dispatchFetch, committed on its own by workerd), {op: "txBegin", name, tx},
// {op: "txCmd", tx, cmd} (cmd: exec | size | nest | commit | rollback), {op: "dispose"}.
// Answers are the Durable Object's JSON text, forwarded untouched: {ok: value} or {error}.
//
// A transaction: the object opens a real `ctx.storage.transaction(async () => ...)` and
// PULLS its commands from here over a service binding (`NODE`, a Node function running in
// this thread) until it is told commit (return: the transaction commits) or rollback
// (throw: it rolls back). `nest` opens another `storage.transaction` inside (workerd nests
// it as a savepoint) with its own pull loop. The answer to each command is carried by the
// object's next pull (or, for the outermost commit/rollback, by the response to the
// request that opened the transaction).

import path from "node:path";
import { pathToFileURL } from "node:url";
import { workerData } from "node:worker_threads";

const { flag: flagBuffer, port, miniflareEntry } = workerData;
const flag = new Int32Array(flagBuffer);

const DO_SCRIPT = `
import { DurableObject } from "cloudflare:workers";

function b64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}
// Values cross JSON tagged: [kind, payload].
function dec([kind, v]) {
  switch (kind) {
    case "s": case "bool": case "json": return v;
    case "n": return typeof v === "string" ? Number(v) : v;  // "NaN", "Infinity", "-Infinity", "-0"
    case "null": return null;
    case "u": return undefined;
    case "bigint": return BigInt(v);
    case "bytes": return Uint8Array.from(atob(v), (c) => c.charCodeAt(0));
    case "ab": return Uint8Array.from(atob(v), (c) => c.charCodeAt(0)).buffer;
  }
  throw new Error("harness: unknown binding kind " + kind);
}
function enc(v) {
  if (v === null) return ["null"];
  if (typeof v === "string") return ["s", v];
  if (typeof v === "number") {
    return Number.isFinite(v) && !Object.is(v, -0) ? ["n", v] : ["n", Object.is(v, -0) ? "-0" : String(v)];
  }
  if (v instanceof ArrayBuffer) return ["ab", b64(new Uint8Array(v))];
  if (typeof v === "bigint") return ["bigint", String(v)];
  if (typeof v === "boolean") return ["bool", v];
  return ["json", v];
}
function fail(e) {
  return { error: String((e && e.message) || e), errorName: (e && e.name) || "Error" };
}
class Rollback extends Error {}

export class SqlObject extends DurableObject {
  run(cmd) {
    try {
      const sql = this.ctx.storage.sql;
      if (cmd.op === "size") return { ok: sql.databaseSize };
      const cursor = sql.exec(cmd.sql, ...cmd.bindings.map(dec));
      const columnNames = cursor.columnNames;
      const rows = [];
      for (const row of cursor.raw()) rows.push(row.map(enc));
      return { ok: { columnNames, rows, rowsRead: cursor.rowsRead, rowsWritten: cursor.rowsWritten } };
    } catch (e) {
      return fail(e);
    }
  }
  async pull(tx, reply) {
    const response = await this.env.NODE.fetch("http://node/pull", {
      method: "POST",
      body: JSON.stringify({ tx, reply }),
    });
    return response.json();
  }
  // One level of transaction: answer commands until commit (return) or rollback (throw).
  async level(tx) {
    let reply = { ok: "open" };
    for (;;) {
      const cmd = await this.pull(tx, reply);
      if (cmd.op === "commit") return;
      if (cmd.op === "rollback") throw new Rollback("rollback");
      if (cmd.op === "nest") reply = await this.transaction(tx);
      else reply = this.run(cmd);
    }
  }
  async transaction(tx) {
    try {
      await this.ctx.storage.transaction(() => this.level(tx));
      return { ok: "committed" };
    } catch (e) {
      return e instanceof Rollback ? { ok: "rolledback" } : fail(e);
    }
  }
  // What workerd's cursor.one() says for 0 and for 2 rows (the stand-in repeats it).
  probe() {
    const out = {};
    for (const [key, q] of [["none", "SELECT 1 WHERE 0"], ["many", "SELECT 1 UNION ALL SELECT 2"]]) {
      try { this.ctx.storage.sql.exec(q).one(); } catch (e) { out[key] = String(e.message); }
    }
    return { ok: out };
  }
  async fetch(request) {
    const cmd = await request.json();
    if (cmd.op === "tx") return Response.json(await this.transaction(cmd.tx));
    if (cmd.op === "probe") return Response.json(this.probe());
    return Response.json(this.run(cmd));
  }
}

export default {
  async fetch(request, env) {
    const name = request.headers.get("x-object");
    return env.OBJECTS.get(env.OBJECTS.idFromName(name)).fetch(request);
  },
};
`;

const { Miniflare } = await import(pathToFileURL(miniflareEntry).href);

// Open transactions: tx id -> {pulls: queued pulls from the object, waiting: a resolver}.
const txs = new Map();
function nextPull(t) {
  if (t.pulls.length) return Promise.resolve(t.pulls.shift());
  return new Promise((resolve) => { t.waiting = resolve; });
}
async function nodePull(request) {
  const { tx, reply } = await request.json();
  const t = txs.get(tx);
  if (!t) return new Response(JSON.stringify({ op: "rollback" }));
  return new Promise((respond) => {
    const pull = { reply, respond: (cmd) => respond(new Response(JSON.stringify(cmd))) };
    if (t.waiting) {
      const w = t.waiting;
      t.waiting = null;
      w(pull);
    } else t.pulls.push(pull);
  });
}

const mf = new Miniflare({
  modules: true,
  script: DO_SCRIPT,
  compatibilityDate: "2025-09-01",
  durableObjects: { OBJECTS: { className: "SqlObject", useSQLite: true } },
  serviceBindings: { NODE: nodePull },
  // no durableObjectsPersist: in memory, gone when the process ends
});
await mf.ready;

async function dispatch(name, body) {
  const response = await mf.dispatchFetch("http://do.bridge/", {
    method: "POST",
    headers: { "x-object": name },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  // workerd's own failures (an object reset, an exception outside the handler) are text.
  return response.ok && text.startsWith("{") ? text : JSON.stringify({ error: text });
}

// The reply to a transaction command: the object's next pull, or the end of the request
// that opened the transaction (outermost commit/rollback, or a failure).
async function txReply(t) {
  const winner = await Promise.race([nextPull(t).then((pull) => ({ pull })), t.done.then((text) => ({ text }))]);
  if (winner.pull) {
    t.current = winner.pull;
    return JSON.stringify(winner.pull.reply);
  }
  t.waiting = null;
  txs.delete(t.id);
  return winner.text;
}

async function handle(msg) {
  switch (msg.op) {
    case "exec":
    case "size":
    case "probe":
      return dispatch(msg.name, msg);
    case "txBegin": {
      const t = { id: msg.tx, pulls: [], waiting: null, current: null };
      txs.set(msg.tx, t);
      t.done = dispatch(msg.name, { op: "tx", tx: msg.tx });
      t.done.then((text) => { t.ended = text; }, (e) => { t.ended = JSON.stringify({ error: String(e) }); });
      return txReply(t);
    }
    case "txCmd": {
      const t = txs.get(msg.tx);
      if (t && !t.current && t.ended !== undefined) {
        // The object ended the transaction on its own (e.g. workerd reset it): say how.
        txs.delete(msg.tx);
        const answer = JSON.parse(t.ended);
        return JSON.stringify({
          error: "harness: the Durable Object ended the transaction before this call: " +
            ("error" in answer ? answer.error : JSON.stringify(answer)),
        });
      }
      if (!t || !t.current) return JSON.stringify({ error: "harness: no open transaction " + msg.tx });
      const pull = t.current;
      t.current = null;
      pull.respond(msg.cmd);
      return txReply(t);
    }
    case "dispose":
      await mf.dispose();
      return JSON.stringify({ ok: null });
  }
  return JSON.stringify({ error: "harness: unknown op " + msg.op });
}

port.on("message", async (msg) => {
  let text;
  try {
    text = await handle(msg);
  } catch (e) {
    text = JSON.stringify({ error: "harness: " + String((e && e.stack) || e) });
  }
  port.postMessage(text);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
  if (msg.op === "dispose") port.close();
});
