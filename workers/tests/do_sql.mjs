// A SYNCHRONOUS stand-in for a SQLite-backed Durable Object's `ctx` (DurableObjectState),
// for Python running in Pyodide on Node's main thread. Every SQL statement runs in
// workerd's real Durable Object SQLite (miniflare, in a worker thread: do_sql_worker.mjs);
// each call blocks this thread with Atomics.wait until the worker thread has the answer.
//
//   const dos = startDurableObjects(miniflareEntry);
//   const state = dos.newDurableObjectState("some-name");   // same name -> same storage
//   state.storage.sql.exec("SELECT ?", 1).toArray();
//   state.storage.transactionSync(() => { ... });
//   dos.dispose();
//
// Constructor names are workerd's (DurableObjectState, DurableObjectStorage, SqlStorage,
// SqlStorageCursor, DurableObjectId), so the Python `workers` SDK wraps them as it does in
// production. What is NOT reproduced: see docs/testing.md ("Durable Object SQL").

import { createHash } from "node:crypto";
import { MessageChannel, Worker, receiveMessageOnPort } from "node:worker_threads";

const TIMEOUT_MS = Number(process.env.ENGRAMDB_DO_TIMEOUT_MS || 120_000);

// Values cross the worker thread and workerd as JSON, tagged [kind, payload] so NaN,
// ±Infinity, -0, bytes, bigint, booleans and undefined arrive as they were sent.
function encodeBinding(v) {
  if (v === null) return ["null"];
  if (v === undefined) return ["u"];
  switch (typeof v) {
    case "string": return ["s", v];
    case "number":
      return Number.isFinite(v) && !Object.is(v, -0) ? ["n", v] : ["n", Object.is(v, -0) ? "-0" : String(v)];
    case "bigint": return ["bigint", String(v)];
    case "boolean": return ["bool", v];
  }
  if (v instanceof ArrayBuffer) return ["ab", Buffer.from(v).toString("base64")];
  if (ArrayBuffer.isView(v)) {
    return ["bytes", Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("base64")];
  }
  if (typeof v === "object" && (Array.isArray(v) || Object.getPrototypeOf(v) === Object.prototype)) {
    return ["json", v]; // workerd refuses these; it says how
  }
  throw new TypeError(`harness: cannot send a ${v?.constructor?.name ?? typeof v} to the Durable Object`);
}
function decodeValue([kind, v]) {
  switch (kind) {
    case "null": return null;
    case "s": case "bool": case "json": return v;
    case "n": return typeof v === "string" ? Number(v) : v;
    case "bigint": return BigInt(v);
    case "ab": {
      const b = Buffer.from(v, "base64");
      const out = new ArrayBuffer(b.length); // a fresh, exact ArrayBuffer as workerd gives
      new Uint8Array(out).set(b);
      return out;
    }
  }
  throw new Error(`harness: unknown value kind ${kind}`);
}

// Call a JS function or a PyProxy. A PyProxy is called through its own call() method, not
// through the Proxy's [[Call]]: Node 20's V8 aborted ("unreachable code" in the
// deoptimizer's builtin continuation) when a Python exception unwound through the latter
// after warm-up (seen in the full Worker suite).
function callBack(fn) {
  return typeof fn.call === "function" && fn.call !== Function.prototype.call ? fn.call(undefined) : fn();
}

export function startDurableObjects(miniflareEntry) {
  const flagBuffer = new SharedArrayBuffer(4);
  const flag = new Int32Array(flagBuffer);
  const { port1, port2 } = new MessageChannel();
  const worker = new Worker(new URL("./do_sql_worker.mjs", import.meta.url), {
    workerData: { flag: flagBuffer, port: port2, miniflareEntry },
    transferList: [port2],
  });
  worker.unref();
  let workerError = null;
  worker.on("error", (e) => { workerError = e; });
  let disposed = false;
  // calls, wall ms and answer bytes (JSON) of the round trips; hostMs: the wall time of
  // this thread's own work for them (encoding statements, decoding rows).
  const stats = { calls: 0, ms: 0, hostMs: 0, bytes: 0 };

  // One blocking round trip to the worker thread; returns the parsed {ok}|{error} answer.
  function call(msg) {
    if (disposed) throw new Error("harness: the Durable Object harness is disposed");
    const t0 = performance.now();
    Atomics.store(flag, 0, 0);
    port1.postMessage(msg);
    const t1 = performance.now();
    const deadline = Date.now() + TIMEOUT_MS;
    let got;
    while (!(got = receiveMessageOnPort(port1))) {
      if (workerError) throw new Error(`harness: the Durable Object thread failed: ${workerError.stack || workerError}`);
      const left = deadline - Date.now();
      if (left <= 0) {
        disposed = true; // a late answer would be taken for the next call's
        throw new Error(`harness: no answer from the Durable Object thread in ${TIMEOUT_MS} ms`);
      }
      Atomics.wait(flag, 0, 0, Math.min(left, 1000));
    }
    const t2 = performance.now();
    const answer = JSON.parse(got.message);
    stats.calls++;
    stats.bytes += got.message.length;
    stats.ms += performance.now() - t0;
    stats.hostMs += (t1 - t0) + (performance.now() - t2);
    return answer;
  }
  function ok(answer) {
    if ("error" in answer) {
      const e = new Error(answer.error);
      if (answer.errorName && answer.errorName !== "Error") e.name = answer.errorName;
      throw e;
    }
    return answer.ok;
  }

  const probe = ok(call({ op: "probe", name: "harness-probe" })); // also waits for workerd

  // Open transactions, by object name: a stack of levels (outermost first).
  const openTx = new Map();
  let txCounter = 0;
  function send(name, cmd) {
    const levels = openTx.get(name);
    if (levels && levels.length) return call({ op: "txCmd", tx: levels[0], cmd });
    return call({ ...cmd, name });
  }

  // cursor.raw(): the remaining rows as arrays (workerd's class is also named RawIterator).
  class RawIterator {
    #more; #take;
    constructor(more, take) { this.#more = more; this.#take = take; }
    next() { return this.#more() ? { done: false, value: this.#take() } : { done: true, value: undefined }; }
    toArray() { const out = []; while (this.#more()) out.push(this.#take()); return out; }
    [Symbol.iterator]() { return this; }
  }

  class SqlStorageCursor {
    #rows; #pos = 0;
    constructor(result) {
      this.#rows = result.rows;
      Object.defineProperty(this, "columnNames", { value: result.columnNames, enumerable: true });
      Object.defineProperty(this, "rowsRead", { value: result.rowsRead, enumerable: true });
      Object.defineProperty(this, "rowsWritten", { value: result.rowsWritten, enumerable: true });
    }
    #take() {
      const t0 = performance.now();
      const tagged = this.#rows[this.#pos++];
      const values = new Array(tagged.length);
      for (let i = 0; i < tagged.length; i++) values[i] = decodeValue(tagged[i]);
      stats.hostMs += performance.now() - t0;
      return values;
    }
    #object(values) {
      const row = {};
      const names = this.columnNames;
      for (let i = 0; i < names.length; i++) row[names[i]] = values[i];
      return row;
    }
    next() {
      if (this.#pos >= this.#rows.length) return { done: true, value: undefined };
      return { done: false, value: this.#object(this.#take()) };
    }
    toArray() {
      const out = [];
      while (this.#pos < this.#rows.length) out.push(this.#object(this.#take()));
      return out;
    }
    one() {
      const left = this.#rows.length - this.#pos;
      if (left === 0) throw new Error(probe.none);
      if (left > 1) throw new Error(probe.many);
      return this.#object(this.#take());
    }
    raw() {
      return new RawIterator(() => this.#pos < this.#rows.length, () => this.#take());
    }
    [Symbol.iterator]() { return this; }
  }

  class SqlStorage {
    #name;
    constructor(name) { this.#name = name; }
    exec(query, ...bindings) {
      const t0 = performance.now();
      const encoded = new Array(bindings.length);
      for (let i = 0; i < bindings.length; i++) encoded[i] = encodeBinding(bindings[i]);
      stats.hostMs += performance.now() - t0;
      return new SqlStorageCursor(ok(send(this.#name, { op: "exec", sql: String(query), bindings: encoded })));
    }
    get databaseSize() { return ok(send(this.#name, { op: "size" })); }
  }

  const KV_TABLE = "CREATE TABLE IF NOT EXISTS harness_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)";

  class DurableObjectStorage {
    #name;
    constructor(name) {
      this.#name = name;
      Object.defineProperty(this, "sql", { value: new SqlStorage(name), enumerable: true });
    }
    // The key-value API a SQLite-backed object also has (workerd keeps it in a table of
    // its own, out of the object's reach); here in a table of the harness, as JSON.
    async get(key) {
      this.sql.exec(KV_TABLE);
      const rows = this.sql.exec("SELECT value FROM harness_kv WHERE key = ?", key).toArray();
      return rows.length ? JSON.parse(rows[0].value) : undefined;
    }
    async put(key, value) {
      this.sql.exec(KV_TABLE);
      this.sql.exec("INSERT OR REPLACE INTO harness_kv VALUES (?, ?)", key, JSON.stringify(value));
    }
    async delete(key) {
      this.sql.exec(KV_TABLE);
      return this.sql.exec("DELETE FROM harness_kv WHERE key = ?", key).rowsWritten > 0;
    }
    transactionSync(fn) {
      const name = this.#name;
      let levels = openTx.get(name);
      if (!levels) openTx.set(name, (levels = []));
      const outermost = levels.length === 0;
      if (outermost) {
        const tx = `${name}#${++txCounter}`;
        const answer = call({ op: "txBegin", name, tx });
        ok(answer);
        levels.push(tx);
      } else {
        ok(call({ op: "txCmd", tx: levels[0], cmd: { op: "nest" } }));
        levels.push(levels[0]);
      }
      const finish = (op) => {
        try {
          return ok(call({ op: "txCmd", tx: levels[0], cmd: { op } }));
        } finally {
          levels.pop();
          if (!levels.length) openTx.delete(name);
        }
      };
      let result;
      try {
        result = callBack(fn);
      } catch (e) {
        try {
          finish("rollback");
        } catch {
          // already ended (e.g. reset by workerd): fn's own error says more
        }
        throw e;
      }
      if (result && typeof result.then === "function") {
        finish("rollback");
        throw new Error("harness: transactionSync() callback returned a Promise; it must be synchronous");
      }
      finish("commit");
      return result;
    }
  }

  class DurableObjectId {
    constructor(name) {
      this.name = name;
      this.hex = createHash("sha256").update(name).digest("hex");
    }
    toString() { return this.hex; }
    equals(other) { return other instanceof DurableObjectId && other.hex === this.hex; }
  }

  class DurableObjectState {
    constructor(name) {
      this.id = new DurableObjectId(name);
      this.storage = new DurableObjectStorage(name);
      this.props = {};
    }
    waitUntil() {}
    async blockConcurrencyWhile(fn) { return callBack(fn); } // one caller at a time anyway
    abort() {}
  }

  return {
    newDurableObjectState(name) { return new DurableObjectState(String(name)); },
    stats() { return { ...stats }; },
    dispose() {
      if (disposed) return;
      try {
        call({ op: "dispose" });
      } catch (e) {
        console.error(`harness: disposing the Durable Object thread: ${e.message}`);
      } finally {
        disposed = true;
        worker.terminate();
      }
    },
  };
}
