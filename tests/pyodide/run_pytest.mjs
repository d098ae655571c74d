// Run this repo's pytest suite inside Pyodide (Node), offline.
//
//   node --experimental-wasm-stack-switching tests/pyodide/run_pytest.mjs \
//        <pyodide-package-dir> <site-dir> [pytest args...]
//
// <pyodide-package-dir>: an npm `pyodide` package (node_modules/pyodide-0-28 ...);
//   its tarball holds the wasm runtime and the stdlib zip, so nothing is fetched.
// <site-dir>: unpacked pure-Python wheels (pytest, hypothesis, ...) made by
//   tests/pyodide/fetch_wheels.py.
// The repo is mounted at /mnt/project (NODEFS) and pytest runs there with the repo's
// own config (pyproject.toml). Only core/ is importable: drivers/ is CPython-only.
// The process exit code is pytest's exit code (5 = no tests collected, also non-zero).
// The stack-switching flag (JSPI) is required: tests/conftest.py runs `async def`
// tests through the WebLoop's run_until_complete, which suspends via JSPI.

import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, "..", "..");
const [pkgArg, siteArg, ...pytestArgs] = process.argv.slice(2);
if (!pkgArg || !siteArg) {
  console.error("usage: run_pytest.mjs <pyodide-package-dir> <site-dir> [pytest args...]");
  process.exit(2);
}
const pkgDir = path.resolve(pkgArg);
const siteDir = path.resolve(siteArg);
if (!existsSync(path.join(pkgDir, "pyodide.mjs"))) {
  console.error(`run_pytest.mjs: no Pyodide at ${pkgDir} (run \`npm ci\` in ${repo})`);
  process.exit(2);
}
if (!existsSync(path.join(siteDir, "pytest"))) {
  console.error(`run_pytest.mjs: no pytest in ${siteDir} (run tests/pyodide/fetch_wheels.py)`);
  process.exit(2);
}

if (typeof WebAssembly.Suspending !== "function" && typeof WebAssembly.Suspender !== "function") {
  console.error("run_pytest.mjs: this Node has no JSPI; run it with --experimental-wasm-stack-switching");
  process.exit(2);
}

const { loadPyodide } = await import(pathToFileURL(path.join(pkgDir, "pyodide.mjs")).href);
const t0 = Date.now();
const pyodide = await loadPyodide({
  indexURL: pkgDir + path.sep,
  packageCacheDir: pkgDir, // never download anything
  env: { PYTHONDONTWRITEBYTECODE: "1", PYTHONHASHSEED: "0", COLUMNS: "100" },
});
// Raw byte streams so pytest's progress output is not re-buffered line by line.
pyodide.setStdout({ write: (buf) => { process.stdout.write(buf); return buf.length; } });
pyodide.setStderr({ write: (buf) => { process.stderr.write(buf); return buf.length; } });

pyodide.FS.mkdirTree("/mnt/project");
pyodide.FS.mkdirTree("/mnt/site");
pyodide.mountNodeFS("/mnt/project", repo);
pyodide.mountNodeFS("/mnt/site", siteDir);

pyodide.globals.set("PYTEST_ARGS", pyodide.toPy(pytestArgs));
pyodide.globals.set("LOAD_MS", Date.now() - t0);
let rc;
try {
  rc = await pyodide.runPythonAsync(`
import os, sys
sys.dont_write_bytecode = True
os.chdir("/mnt/project")
sys.path[:0] = ["/mnt/project/core", "/mnt/project", "/mnt/site"]
import pyodide as _pyodide
print(f"pyodide {_pyodide.__version__} (loaded in {LOAD_MS} ms), python {sys.version.split()[0]},"
      f" platform {sys.platform}", flush=True)
import pytest
rc = int(pytest.main(["-p", "no:cacheprovider", *PYTEST_ARGS]))
sys.stdout.flush(); sys.stderr.flush()
rc
`);
} catch (err) {
  console.error("run_pytest.mjs: Python raised outside pytest:\n", err);
  rc = 3;
}
process.exitCode = rc;
