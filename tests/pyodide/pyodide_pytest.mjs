// Boot Pyodide from its npm package, offline, and run pytest in it. Shared by
// tests/pyodide/run_pytest.mjs (the core suite) and workers/tests/run.mjs (the Worker).
//
// The repo is mounted at /mnt/project (NODEFS), the unpacked pure-Python test wheels at
// /mnt/site, and LoCoMo's development split, when it is beside the repository
// (../shared/data/locomo, as eval.smoke finds it), at the same place relative to
// /mnt/project: /mnt/shared/data/locomo. `paths` (relative to the repo) go first on sys.path. pytest starts from
// runPythonAsync, so under `node --experimental-wasm-stack-switching` (JSPI) the
// tests/conftest.py hook can drive `async def` tests with the WebLoop. Returns pytest's
// exit code (3 if Python raised outside pytest).

import { existsSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

export function requireJspi(script) {
  if (typeof WebAssembly.Suspending !== "function" && typeof WebAssembly.Suspender !== "function") {
    console.error(`${script}: this Node has no JSPI; run it with --experimental-wasm-stack-switching`);
    process.exit(2);
  }
}

export async function runPytestInPyodide({
  pkgDir, repo, siteDir, pytestArgs, paths = ["core"], jsModules = {}, banner = "",
}) {
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
  const locomo = path.resolve(repo, "..", "shared", "data", "locomo");
  if (existsSync(locomo)) {
    pyodide.FS.mkdirTree("/mnt/shared/data/locomo");
    pyodide.mountNodeFS("/mnt/shared/data/locomo", locomo);
  }
  for (const [name, module] of Object.entries(jsModules)) pyodide.registerJsModule(name, module);
  pyodide.globals.set("PYTEST_ARGS", pyodide.toPy(pytestArgs));
  pyodide.globals.set("SYS_PATHS", pyodide.toPy([...paths.map((p) => `/mnt/project/${p}`), "/mnt/project", "/mnt/site"]));
  pyodide.globals.set("BANNER", `(loaded in ${Date.now() - t0} ms)${banner ? " " + banner : ""}`);
  try {
    return await pyodide.runPythonAsync(`
import os, sys
sys.dont_write_bytecode = True
os.chdir("/mnt/project")
sys.path[:0] = list(SYS_PATHS)
import pyodide as _pyodide
print(f"pyodide {_pyodide.__version__} {BANNER}, python {sys.version.split()[0]},"
      f" platform {sys.platform}", flush=True)
import pytest
rc = int(pytest.main(["-p", "no:cacheprovider", *PYTEST_ARGS]))
sys.stdout.flush(); sys.stderr.flush()
rc
`);
  } catch (err) {
    console.error("Python raised outside pytest:\n", err);
    return 3;
  }
}
