// KV and rate-limit bindings for the Worker tests, from miniflare's real implementations.
//
// run.mjs registers the object `startBindings()` answers as the JS module
// `engramdb_bindings`. Its own miniflare (workerd) starts lazily, on the first test that
// asks for a binding, so the other tests pay nothing:
// * newKv(): a KV namespace (`KvNamespace`, as a Python Worker's env.TOKENS is named)
//   whose get/put/delete each run, in ONE request to a bridge worker, on miniflare's real
//   KV namespace (as run.mjs reaches D1); every call gets a fresh namespace.
// * newRateLimiter(): a `Ratelimit` binding whose limit({key}) runs on miniflare's real
//   rate limiter (workerd's in-memory simple limiter: `limit` requests per `period` per
//   key; offline); every call gets a fresh limiter, so budgets never leak between tests.
//   brokenRateLimiter() / brokenKv(): ones whose every call throws.
//   freshWindow(marginSeconds): waits, if need be, until the limiters' current window has
//   that much time left: a window that turns between a budget's calls and the call past
//   it gives a fresh budget, and a test of the 429 would see a 200.
// * countingStream(chunkBytes): a ReadableStream that never ends, counting the chunks
//   pulled from it, to prove that a body is not read past the size limit.

const POOL = 64;
const LIMIT = 3; // requests per key per period, in every limiter of the pool
const PERIOD = 60; // seconds; miniflare's windows are aligned to the clock (Date.now() / period)
const BRIDGE = `
export default {
  async fetch(request, env) {
    const { binding, method, args } = await request.json();
    try {
      const out = await env[binding][method](...args);
      return Response.json({ ok: out === undefined ? null : out });
    } catch (e) {
      return Response.json({ error: String((e && e.message) || e) });
    }
  },
};`;

export function startBindings(Miniflare) {
  let mf = null;
  let next = 0;
  async function call(binding, method, args) {
    if (mf === null) {
      const kvNamespaces = {};
      const ratelimits = {};
      for (let i = 0; i < POOL; i++) {
        kvNamespaces[`KV${i}`] = `engramdb-kv-${i}`;
        ratelimits[`RL${i}`] = { simple: { limit: LIMIT, period: PERIOD } };
      }
      mf = new Miniflare({ modules: true, script: BRIDGE, kvNamespaces, ratelimits });
    }
    const response = await mf.dispatchFetch("http://bindings.bridge/", {
      method: "POST",
      body: JSON.stringify({ binding, method, args }),
    });
    const answer = await response.json();
    if ("error" in answer) throw new Error(answer.error);
    return answer.ok;
  }
  function take() {
    if (next >= POOL) throw new Error(`the bindings pool (${POOL}) is used up`);
    return next++;
  }
  class KvNamespace {
    constructor(name) { this.name = name; }
    get(key) { return call(this.name, "get", [key]); } // text or null
    put(key, value) { return call(this.name, "put", [key, value]); }
    delete(key) { return call(this.name, "delete", [key]); }
  }
  class Ratelimit {
    constructor(name) { this.name = name; }
    limit(options) { return call(this.name, "limit", [{ key: options.key }]); }
  }
  return {
    rateLimit: LIMIT,
    newKv() { return new KvNamespace(`KV${take()}`); },
    newRateLimiter() { return new Ratelimit(`RL${take()}`); },
    async freshWindow(marginSeconds) {
      const left = PERIOD * 1000 - (Date.now() % (PERIOD * 1000));
      if (left < marginSeconds * 1000) await new Promise((done) => setTimeout(done, left + 500));
    },
    // A limiter and a namespace whose every call fails (no binding behind them), as in
    // an outage.
    brokenRateLimiter() { return new Ratelimit("RL_MISSING"); },
    brokenKv() { return new KvNamespace("KV_MISSING"); },
    countingStream(chunkBytes) {
      const counter = { pulled: 0 };
      counter.stream = new ReadableStream({
        pull(controller) {
          counter.pulled += 1;
          controller.enqueue(new Uint8Array(chunkBytes).fill(0x20));
        },
      }, { highWaterMark: 0 });
      return counter;
    },
    async dispose() { if (mf !== null) await mf.dispose(); },
  };
}
