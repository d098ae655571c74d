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
import { fileURLToPath } from "node:url";
import { requireJspi, runPytestInPyodide } from "./pyodide_pytest.mjs";

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

requireJspi("run_pytest.mjs");
// Exit at once, as workers/tests/run.mjs does: Pyodide's WebLoop keeps the JS timer of a
// cancelled asyncio timeout, so Node would otherwise wait it out after pytest is done (an
// hour for an owned maintainer's interval that aclose() woke early).
process.exit(await runPytestInPyodide({ pkgDir, repo, siteDir, pytestArgs }));
