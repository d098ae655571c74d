// Run the Worker's tests inside real Pyodide, against miniflare's real (workerd) D1,
// in one Node process, offline.
//
//   cd workers && npm ci
//   python tests/fetch_wheels.py --python-version 3.13 --dest .cache/py3.13
//   node --experimental-wasm-stack-switching tests/run.mjs .cache/py3.13/site [pytest args]
//
// Options before the site dir: --pyodide <dir> (an npm `pyodide` package; default
// workers/node_modules/pyodide = 0.28.3, Python 3.13 like Python Workers).
// Without a test path among the pytest args, workers/tests is run. The exit code is pytest's (5 = nothing collected).
//
// Pyodide boots and pytest runs through tests/pyodide/pyodide_pytest.mjs, as for the core
// suite: Pyodide from its npm package (nothing fetched),
// the repo mounted at /mnt/project, unpacked pure-Python wheels on sys.path, pytest
// started from runPythonAsync (JSPI: tests/conftest.py drives `async def` tests with
// the WebLoop). Added here:
// * miniflare starts workerd with a pool of local D1 databases; Python gets them from
//   the JS module `engramdb_harness` (newD1(): a fresh database per test), dressed so
//   the `workers` SDK recognises them as it does in a real Worker (constructor name
//   "D1Database"), and an `Ai`-named stub factory for the AI binding;
// * the PyPI `workers-runtime-sdk` (the real `workers` module) is on sys.path; its two
//   runtime-internal imports are stubbed by workers/tests/conftest.py;
// * newDurableObjectState(name): a synchronous stand-in for a SQLite-backed Durable
//   Object's ctx whose SQL runs in workerd's real DO SQLite (workers/tests/do_sql.mjs;
//   its own Miniflare in a worker thread, started on first use).
// * the JS module `engramdb_http` (workers/tests/http_bridge.mjs): a Node HTTP server on
//   127.0.0.1 in front of a handler (the Worker's fetch) and host processes to await, so
//   test_client_worker.py runs the CPython client against the Worker over real HTTP.

import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { requireJspi, runPytestInPyodide } from "../../tests/pyodide/pyodide_pytest.mjs";
import { startDurableObjects } from "./do_sql.mjs";
import { startBindings } from "./harness_bindings.mjs"; // KV + rate limits: engramdb_bindings
import { startHttpBridge } from "./http_bridge.mjs"; // real HTTP + host processes: engramdb_http

const here = path.dirname(fileURLToPath(import.meta.url));
const workersDir = path.resolve(here, "..");
const repo = path.resolve(workersDir, "..");

const argv = process.argv.slice(2);
let pkgDir = path.join(workersDir, "node_modules", "pyodide");
if (argv[0] === "--pyodide") {
  pkgDir = path.resolve(argv[1]);
  argv.splice(0, 2);
}
const [siteArg, ...rest] = argv;
// Without a path among the pytest args, run workers/tests.
const isPath = (a) => !a.startsWith("-") && existsSync(path.resolve(repo, a.split("::")[0]));
const pytestArgs = rest.some(isPath) ? rest : [...rest, "workers/tests"];
if (!siteArg) {
  console.error("usage: run.mjs [--pyodide <dir>] <site-dir> [pytest args...]");
  process.exit(2);
}
const siteDir = path.resolve(siteArg);
if (!existsSync(path.join(pkgDir, "pyodide.mjs"))) {
  console.error(`run.mjs: no Pyodide at ${pkgDir} (run \`npm ci\` in ${workersDir})`);
  process.exit(2);
}
for (const needed of ["pytest", "workers"]) {
  if (!existsSync(path.join(siteDir, needed))) {
    console.error(`run.mjs: no ${needed} in ${siteDir} (run workers/tests/fetch_wheels.py)`);
    process.exit(2);
  }
}
requireJspi("run.mjs");

const miniflareEntry = path.join(workersDir, "node_modules", "miniflare", "dist", "src", "index.js");
const { Miniflare } = await import(pathToFileURL(miniflareEntry).href);
let durableObjects = null; // started on first use: blocking calls need their own Miniflare

const t0 = Date.now();
// One database per test: workerd creates each lazily, so a large pool is cheap to declare.
const POOL = Number(process.env.ENGRAMDB_D1_POOL || 512);
// How Python reaches D1 (both execute in workerd's real D1):
//  "bridge" (default): a D1Database whose statements are data; each raw()/all()/run()/
//    first()/batch() is ONE request into a tiny worker that runs it on env.DBn with the
//    real binding (so bind conversions, batch transactions and errors are workerd's).
//  "proxy": miniflare's own binding object (its Node<->workerd proxy makes every
//    prepare() and bind() a blocking round trip: ~4x slower).
const MODE = process.env.ENGRAMDB_D1 || "bridge";
const d1Databases = {};
for (let i = 0; i < POOL; i++) d1Databases[`DB${i}`] = `engramdb-test-${i}`;
const BRIDGE_WORKER = `
function arg(v) {
  if (v && typeof v === "object") {
    if ("$bytes" in v) return Uint8Array.from(atob(v.$bytes), (c) => c.charCodeAt(0));
    if ("$undefined" in v) return undefined;
    if ("$bigint" in v) return BigInt(v.$bigint);
  }
  return v;
}
export default {
  async fetch(request, env) {
    const { db, method, statements, args } = await request.json();
    const D = env[db];
    try {
      const prepared = statements.map(([sql, params, bound]) =>
        bound ? D.prepare(sql).bind(...params.map(arg)) : D.prepare(sql));
      const out = method === "batch"
        ? await D.batch(prepared)
        : await prepared[0][method](...(args || []));
      return Response.json({ ok: out === undefined ? null : out });
    } catch (e) {
      return Response.json({ error: String((e && e.message) || e) });
    }
  },
};`;
const mf = new Miniflare({
  modules: true,
  script: BRIDGE_WORKER,
  d1Databases, // no d1Persist: in memory, gone when the process ends
});
await mf.ready;
const mfMs = Date.now() - t0;

// What a Python Worker gets is a D1Database; the SDK keys its wrappers on that name.
function encodeParam(v) {
  if (v === undefined) return { $undefined: true };
  if (typeof v === "bigint") return { $bigint: String(v) };
  if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) {
    const bytes = v instanceof ArrayBuffer ? new Uint8Array(v)
      : new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    return { $bytes: Buffer.from(bytes).toString("base64") };
  }
  return v;
}
class D1PreparedStatement {
  constructor(db, sql, params, bound) {
    this.db = db; this.sql = sql; this.params = params; this.bound = bound;
  }
  bind(...values) { return new D1PreparedStatement(this.db, this.sql, values.map(encodeParam), true); }
  data() { return [this.sql, this.params, this.bound]; }
  first(column) { return this.db._call("first", [this.data()], column === undefined ? [] : [column]); }
  all() { return this.db._call("all", [this.data()]); }
  run() { return this.db._call("run", [this.data()]); }
  raw(options) { return this.db._call("raw", [this.data()], options === undefined ? [] : [options]); }
}
class D1Database {
  constructor(name) { this.name = name; }
  prepare(sql) { return new D1PreparedStatement(this, sql, [], false); }
  batch(statements) { return this._call("batch", Array.from(statements, (s) => s.data())); }
  async exec(sql) { return this._call("run", [[sql, [], false]]); }
  async _call(method, statements, args) {
    const response = await mf.dispatchFetch("http://d1.bridge/", {
      method: "POST",
      body: JSON.stringify({ db: this.name, method, statements, args }),
    });
    const answer = await response.json();
    if ("error" in answer) throw new Error(answer.error);
    return answer.ok;
  }
}
class MiniflareD1Database {} // miniflare's object, renamed as the SDK expects
function asD1Database(db) {
  return new Proxy(db, {
    get(target, key) {
      if (key === "constructor") return MiniflareD1Database;
      const value = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
Object.defineProperty(MiniflareD1Database, "name", { value: "D1Database" });
class Ai {
  constructor(impl) { this.impl = impl; }
  // The Python behind the stub answers {$error: message} for a failure to simulate, so
  // the caller sees a plain JS Error as from the real binding.
  async run(model, inputs, options) {
    const answer = this.impl(model, inputs, options);
    if (answer && typeof answer === "object" && "$error" in answer) throw new Error(answer.$error);
    return answer;
  }
}
// Keep miniflare's binding objects alive for the whole run: letting one be collected
// while its proxy is idle has been seen to desynchronise miniflare's blocking calls.
const keepAlive = [];
let next = 0;
function take() {
  if (next >= POOL) throw new Error(`the D1 pool (${POOL}) is used up; set ENGRAMDB_D1_POOL higher`);
  return `DB${next++}`;
}
function threadCpuNs(pid, tid) {
  const file = `/proc/${pid}/task/${tid}/schedstat`;
  try { return Number(readFileSync(file, "utf8").split(" ")[0]); } catch { return 0; }
}
function processCpuNs(pid) {
  try {
    return readdirSync(`/proc/${pid}/task`).reduce((n, tid) => n + threadCpuNs(pid, tid), 0);
  } catch { return 0; }
}
function descendants(pid) {
  let kids = [];
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      kids.push(...readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").split(" ").filter(Boolean).map(Number));
    }
  } catch { return []; }
  return kids.flatMap((kid) => [kid, ...descendants(kid)]);
}
const harness = {
  poolSize: POOL,
  mode: MODE,
  // A fresh, empty D1 database, as the Workers runtime hands one to Python.
  async newD1() {
    const name = take();
    if (MODE !== "proxy") return new D1Database(name);
    const db = await mf.getD1Database(name);
    keepAlive.push(db);
    return asD1Database(db);
  },
  // miniflare's own binding object, renamed D1Database (the "proxy" path), always.
  async proxyD1() {
    const db = await mf.getD1Database(take());
    keepAlive.push(db);
    return asD1Database(db);
  },
  // miniflare's object as it is (constructor name not D1Database): a raw JsProxy test.
  async rawD1() {
    const db = await mf.getD1Database(take());
    keepAlive.push(db);
    return db;
  },
  makeAi(impl) { return new Ai(impl); },
  makeCtx() { return { waitUntil() {}, passThroughOnException() {}, props: {} }; },
  // CPU clocks for benchmarks (nanoseconds). The main thread (Pyodide and the JS it
  // calls): the process's precise total (getrusage) less every other thread's
  // /proc schedstat (those threads are asleep when it is read, so theirs is exact, while
  // a running thread's schedstat lags by up to a scheduler tick). And every process this
  // one started (workerd: the SQL).
  mainThreadCpuNs() {
    const { user, system } = process.cpuUsage();
    const others = readdirSync(`/proc/${process.pid}/task`)
      .filter((tid) => Number(tid) !== process.pid)
      .reduce((n, tid) => n + threadCpuNs(process.pid, tid), 0);
    return (user + system) * 1000 - others;
  },
  childrenCpuNs() { return descendants(process.pid).reduce((n, pid) => n + processCpuNs(pid), 0); },
  // A SQLite-backed Durable Object's ctx (DurableObjectState); same name, same storage.
  newDurableObjectState(name) {
    durableObjects ??= startDurableObjects(miniflareEntry);
    return durableObjects.newDurableObjectState(name);
  },
  // {calls, ms}: blocking round trips to the Durable Object so far, and their wall time.
  durableObjectStats() { return durableObjects ? durableObjects.stats() : { calls: 0, ms: 0 }; },
};

const bindings = startBindings(Miniflare);
const rc = await runPytestInPyodide({
  pkgDir,
  repo,
  siteDir,
  pytestArgs,
  paths: ["core", "drivers", "workers/src"],  // drivers: engramdb.backup (moves)
  jsModules: {
    engramdb_harness: harness,
    engramdb_bindings: bindings,
    engramdb_http: startHttpBridge(repo),
  },
  banner: `miniflare D1 (${MODE}, pool of ${POOL}) ready in ${mfMs} ms`,
});
durableObjects?.dispose();
await mf.dispose();
await bindings.dispose();
process.exit(rc);
