// Real HTTP in front of the Worker, and a real host process, for the client tests
// (workers/tests/test_client_worker.py).
//
// run.mjs registers the object `startHttpBridge(repo)` answers as the JS module
// `engramdb_http`:
// * serve(handler): a Node `http` server on 127.0.0.1 (a free port); each request
//   becomes a JS Request (method, URL, headers, body) handed to `handler` (Python, whose
//   answer is a JS Response or a promise of one), and that Response's status, headers
//   and body are written back. Resolves {url, close()}.
// * run(command, args, env, timeoutMs): a process on the host (cwd: the repository, the
//   environment this one's plus `env`); resolves {code, stdout, stderr} when it exits,
//   so Python awaits it (JSPI) while Node's event loop serves the requests it sends.
// * repo, pathDelimiter: the repository on the host, and how PYTHONPATH joins paths.

import { spawn } from "node:child_process";
import http from "node:http";
import path from "node:path";

// Hop-by-hop headers, and those a Request computes itself, are not passed on.
const SKIPPED = new Set(["connection", "content-length", "host", "keep-alive", "transfer-encoding"]);

export function startHttpBridge(repo) {
  return {
    repo,
    pathDelimiter: path.delimiter,
    serve(handler) {
      const server = http.createServer(async (req, res) => {
        try {
          const chunks = [];
          for await (const chunk of req) chunks.push(chunk);
          const headers = new Headers();
          for (let i = 0; i < req.rawHeaders.length; i += 2) {
            const name = req.rawHeaders[i];
            if (!SKIPPED.has(name.toLowerCase())) headers.append(name, req.rawHeaders[i + 1]);
          }
          const init = { method: req.method, headers };
          if (chunks.length && req.method !== "GET" && req.method !== "HEAD") {
            init.body = Buffer.concat(chunks);
          }
          const response = await handler(new Request(`http://${req.headers.host}${req.url}`, init));
          const body = Buffer.from(await response.arrayBuffer());
          const out = {};
          response.headers.forEach((value, name) => { out[name] = value; });
          res.writeHead(response.status, out);
          res.end(body);
        } catch (e) { // the handler failed: a plain 599 whose body says how
          res.writeHead(599, { "content-type": "text/plain" });
          res.end(`http_bridge: ${(e && e.stack) || e}`);
        }
      });
      return new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(0, "127.0.0.1", () => {
          resolve({
            url: `http://127.0.0.1:${server.address().port}`,
            close() {
              server.closeAllConnections();
              return new Promise((done) => server.close(() => done()));
            },
          });
        });
      });
    },
    run(command, args, env, timeoutMs = 120000) {
      const argv = Array.from(args);
      const environment = { ...process.env, ...env };
      // Spawned on a fresh turn of the event loop: spawned from the call Python makes
      // (on a JSPI-switched stack) the child was seen to die of SIGSEGV before its exec.
      return new Promise((ready) => setImmediate(ready)).then(() => new Promise((resolve) => {
        const child = spawn(command, argv, {
          cwd: repo,
          env: environment,
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (data) => { stdout += data; });
        child.stderr.on("data", (data) => { stderr += data; });
        const timer = setTimeout(() => {
          stderr += `\nhttp_bridge: killed after ${timeoutMs} ms`;
          child.kill("SIGKILL");
        }, timeoutMs);
        child.on("error", (e) => { // e.g. the command is not on PATH
          clearTimeout(timer);
          resolve({ code: -1, stdout, stderr: `${stderr}\nhttp_bridge: ${e.message}` });
        });
        child.on("close", (code, signal) => {
          clearTimeout(timer);
          resolve({ code: code ?? -1, stdout, stderr: signal ? `${stderr}\n(${signal})` : stderr });
        });
      }));
    },
  };
}
