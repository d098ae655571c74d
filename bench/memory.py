"""Memory on SQLite: ingest rate, recall latency, cold start and peak RSS.

Run from the repository root::

    PYTHONPATH=core:drivers python -m bench.memory            # 10k ingest, 10k + 100k recall
    PYTHONPATH=core:drivers python -m bench.memory --quick    # smoke run (2k / 10k)

* Ingest: ``remember_many`` of 10,000 distinct texts with ``HashEmbedder()`` (d=256)
  into a new SQLite file, one call with its defaults (batches of 256, deduplication),
  and, as a baseline in the same run, one atomic batch without deduplication; the
  median of ``--runs`` runs.
* Recall: a second file with a ``ProjectionEmbedder``: HashEmbedder-like term features
  through a fixed, seeded random projection to d=384, so vectors are dense like a real
  model's. Texts are 8-14 words from a 3,000-word synthetic vocabulary; queries
  are 4-6 words of a stored text. p50 of ``recall(..., mode="vector")`` with
  ``exact=True`` and with the default sign-bit prefilter + exact rerank, and of the
  default hybrid recall, after one warm-up recall (the vector cache is loaded).
* Kernels: with ``--kernels python,numpy`` (the default where numpy imports) every recall
  figure and the cold start are measured per vector kernel of ``SqliteStore``
  (``vector_kernel=``, ``ENGRAMDB_VECTOR_KERNEL``), interleaved query by query over the
  same file (and cold process by cold process), after one warm-up pass of every query.
* Cold start: a fresh process opens the 100k file and runs its first hybrid recall (the
  OS page cache is warm): the vector cache is loaded from the vectors' derived index
  data, nothing is decoded or quantised; the median of ``--cold-runs`` processes. The
  memory of that process: its own (``RssAnon``), compared with twice the raw float32
  size plus the UTF-8 text size; the database pages SQLite's memory map brought in
  (``RssFile``: page cache, shared and evictable); and the peak resident set (``VmHWM``,
  both together).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import math
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from engramdb import HashEmbedder, Memory
from engramdb._base.types import EmbeddingSpace, EmbedKind
from engramdb._lexical.bm25 import terms
from engramdb.sqlite import SqliteStore

SCOPE = ("bench", "user", "u1")
COLD_QUERY = "first recall after a restart"
D = 384


class ProjectionEmbedder:
    """HashEmbedder-like features through a fixed random projection: dense, deterministic.

    Each distinct term of a text (``engramdb._lexical.bm25.terms``) gets weight ``1 + ln(tf)``
    and a fixed random column (uniform, unit variance) of ``dimensions`` values seeded by
    the term's blake2b hash; the vector is the weighted sum of its terms' columns (Memory
    normalises it).
    """

    def __init__(self, dimensions: int = D) -> None:
        self._space = EmbeddingSpace("bench", "projection", dimensions)
        self._columns: dict[str, list[float]] = {}

    @property
    def space(self) -> EmbeddingSpace:
        return self._space

    @property
    def max_batch(self) -> int:
        return 1024

    def _column(self, term: str) -> list[float]:
        column = self._columns.get(term)
        if column is None:
            seed = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "little")
            noise = random.Random(seed).randbytes(self._space.dimensions)
            column = [(b - 127.5) / 73.9 for b in noise]  # unit variance, zero mean
            self._columns[term] = column
        return column

    def embed(self, texts: Sequence[str], kind: EmbedKind = "document") -> list[Sequence[float]]:
        out: list[Sequence[float]] = []
        for text in texts:
            counts: dict[str, int] = {}
            for term in terms(text):
                counts[term] = counts.get(term, 0) + 1
            columns = [
                self._column(term)
                if tf == 1
                else [(1.0 + math.log(tf)) * x for x in self._column(term)]
                for term, tf in counts.items()
            ] or [[1.0] + [0.0] * (self._space.dimensions - 1)]
            out.append([sum(values) for values in zip(*columns, strict=True)])
        return out

    async def aembed(
        self, texts: Sequence[str], kind: EmbedKind = "document"
    ) -> list[Sequence[float]]:
        return self.embed(texts, kind)


def _vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


def corpus(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng)
    return [
        f"{i} " + " ".join(rng.choice(vocabulary) for _ in range(rng.randint(8, 14)))
        for i in range(n)
    ]


def queries_for(texts: Sequence[str], count: int, seed: int = 2) -> list[str]:
    rng = random.Random(seed)
    out = []
    for text in rng.sample(list(texts), count):
        words = text.split()[1:]
        out.append(" ".join(rng.sample(words, min(len(words), rng.randint(4, 6)))))
    return out


def ingest_rate(path: Path, n: int, **options: Any) -> float:
    texts = corpus(n, seed=11)
    with Memory(SqliteStore(path), HashEmbedder()) as memory:
        start = time.perf_counter()
        memory.remember_many(({"text": t, "scope": SCOPE} for t in texts), **options)
        elapsed = time.perf_counter() - start
    return n / elapsed


# remember_many's defaults (batches of 256, identical texts stored once), and the one
# atomic batch without deduplication that it was before (as a baseline in the same run).
INGESTS: dict[str, dict[str, Any]] = {
    "remember_many": {},
    "one batch, no dedupe": {"batch_size": 100_000, "dedupe": False},
}


RECALLS: dict[str, dict[str, Any]] = {
    "exact_ms": {"mode": "vector", "exact": True},
    "prefilter_ms": {"mode": "vector"},
    "hybrid_ms": {},
}


def interleaved_p50_ms(
    memories: dict[str, Memory], queries: Sequence[str], **options: object
) -> dict[str, float]:
    """p50 of each memory's recall, the memories taking turns query by query, after a
    warm-up pass of every query through each (caches loaded, query terms embedded)."""
    for memory in memories.values():
        for query in queries:
            memory.recall(query, scopes=[SCOPE], **options)
    times: dict[str, list[float]] = {name: [] for name in memories}
    for query in queries:
        for name, memory in memories.items():
            start = time.perf_counter()
            memory.recall(query, scopes=[SCOPE], **options)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


def recall_rows(
    path: Path, sizes: Sequence[int], queries: int, kernels: Sequence[str] = ("python",)
) -> list[dict[str, Any]]:
    texts = corpus(max(sizes))
    rows: list[dict[str, Any]] = []
    done = 0
    embedder = ProjectionEmbedder()
    with Memory(SqliteStore(path, vector_kernel=kernels[0]), embedder) as memory:
        for size in sizes:
            start = time.perf_counter()
            for chunk in range(done, size, 5000):
                memory.remember_many(
                    {"text": t, "scope": SCOPE} for t in texts[chunk : min(size, chunk + 5000)]
                )
            build = time.perf_counter() - start
            done = size
            asked = queries_for(texts[:size], queries)
            memories = {k: Memory(SqliteStore(path, vector_kernel=k), embedder) for k in kernels}
            try:
                p50s = {
                    name: interleaved_p50_ms(memories, asked, **options)
                    for name, options in RECALLS.items()
                }
            finally:
                for other in memories.values():
                    other.close()
            rate = (size - (rows[-1]["n"] if rows else 0)) / build
            for kernel in kernels:
                rows.append(
                    {
                        "n": size,
                        "kernel": kernel,
                        "ingest_per_s": rate,
                        **{name: p50s[name][kernel] for name in RECALLS},
                    }
                )
    return rows


def _status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status, in MB (VmHWM: the peak
    resident set, reset by exec unlike ru_maxrss; RssAnon: memory of its own; RssFile:
    file pages mapped in, here the database's through SQLite's memory map)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if field == "VmHWM" else 0


WARM_AFTER_COLD = 20  # recalls timed after the first one in a cold child
SETTLE_S = 0.3  # OpenBLAS's threads spin for about 70 ms after `import numpy`


def run_child(
    open_: Callable[[], Any],
    first: Callable[[Any], object],
    again: Callable[[Any, str], object],
) -> int:
    """Open a store (``open_``), run its first recall (``first``), then
    ``WARM_AFTER_COLD`` more (``again`` with a query each: what a restarted server
    serves next), print the timings and memory figures as JSON, close it. The clock
    starts ``SETTLE_S`` after the imports: the threads OpenBLAS starts at ``import
    numpy`` spin for tens of milliseconds before they sleep, CPU time of neither side's
    work (the peer imports numpy with its module, engramdb's child just before this)."""
    warm_queries = queries_for(corpus(1_000), WARM_AFTER_COLD, seed=3)
    time.sleep(SETTLE_S)
    base = _status_mb("VmHWM")
    start, cpu_start = time.perf_counter(), time.process_time()
    opened_store = open_()
    opened = time.perf_counter()
    first(opened_store)
    done, cpu_done = time.perf_counter(), time.process_time()
    figures = {name: _status_mb(name) for name in ("VmHWM", "RssAnon", "RssFile")}
    warm = []
    for query in warm_queries:
        began = time.process_time()
        again(opened_store, query)
        warm.append(time.process_time() - began)
    opened_store.close()
    print(
        json.dumps(
            {
                "open_s": opened - start,
                "cold_s": done - start,
                "cold_cpu_s": cpu_done - cpu_start,
                "warm_cpu_ms": statistics.median(warm) * 1000,
                "base_rss_mb": base,
                "peak_rss_mb": figures["VmHWM"],
                "anon_mb": figures["RssAnon"],
                "file_mb": figures["RssFile"],
            }
        )
    )
    return 0


def child(path: str) -> int:
    """Open ``path``, run one recall, print timings and peak RSS as JSON. Modules are
    imported before the clock starts, numpy too where the store's kernel will use it
    (the peer of ``bench.versus`` imports it at import time): the figure is the open
    and the first recall, not the interpreter's imports."""
    if os.environ.get("ENGRAMDB_VECTOR_KERNEL", "auto") != "python":
        with contextlib.suppress(ImportError):
            import numpy  # noqa: F401
    return run_child(
        lambda: Memory(SqliteStore(path), ProjectionEmbedder()),
        lambda memory: memory.recall(COLD_QUERY, scopes=[SCOPE]),  # hybrid: both legs
        lambda memory, query: memory.recall(query, scopes=[SCOPE]),
    )


def child_json(command: Sequence[str], **options: Any) -> dict[str, Any]:
    """What ``command`` (a child process, e.g. ``python -m bench.memory --child``)
    prints on stdout, read as JSON; ``options`` go to ``subprocess.run`` (``env``,
    ``cwd``). A child that fails raises ``CalledProcessError``."""
    done = subprocess.run(command, capture_output=True, text=True, check=True, **options)
    return dict(json.loads(done.stdout))


def cold_start(path: Path, kernel: str | None = None) -> dict[str, float]:
    env = dict(os.environ)
    if kernel is not None:
        env["ENGRAMDB_VECTOR_KERNEL"] = kernel
    return child_json([sys.executable, "-m", "bench.memory", "--child", str(path)], env=env)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2k ingest, 10k recall")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--runs", type=int, default=5, help="ingest runs (median shown)")
    parser.add_argument(
        "--cold-runs", type=int, default=5, help="fresh processes for the cold start (median)"
    )
    parser.add_argument("--ingest-only", action="store_true", help="stop after the ingest")
    parser.add_argument(
        "--kernels",
        default=None,
        help="vector kernels of SqliteStore to compare, e.g. python,numpy (default: both "
        "where numpy imports, else python)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child)
    if args.kernels is None:
        has_numpy = importlib.util.find_spec("numpy") is not None
        kernels = ["python", "numpy"] if has_numpy else ["python"]
    else:
        kernels = args.kernels.split(",")

    ingest_n = 2_000 if args.quick else 10_000
    sizes = [2_000, 10_000] if args.quick else [10_000, 100_000]
    with tempfile.TemporaryDirectory() as tmp:
        print(
            f"# Python {platform.python_version()}, {platform.machine()}, SQLite "
            f"{__import__('sqlite3').sqlite_version}, {args.queries} queries, top_k=10"
        )
        rates: dict[str, list[float]] = {name: [] for name in INGESTS}
        for run in range(args.runs):  # a fresh file each run; this machine is noisy
            for name, options in INGESTS.items():
                rates[name].append(ingest_rate(Path(tmp) / f"ingest-{run}.db", ingest_n, **options))
                (Path(tmp) / f"ingest-{run}.db").unlink()
        for name, values in rates.items():
            print(
                f"{name} of {ingest_n} items (HashEmbedder d=256): median "
                f"{statistics.median(values):,.0f} items/s over {args.runs} runs "
                f"({', '.join(f'{r:,.0f}' for r in values)})"
            )
        if args.ingest_only:
            return 0
        path = Path(tmp) / "recall.db"
        rows = recall_rows(path, sizes, args.queries, kernels)
        print()
        print(
            "| items in scope | kernel | ingest (projection d=384) | recall p50 exact "
            "| recall p50 prefilter | hybrid p50 (prefilter) |"
        )
        print("|---|---|---|---|---|---|")
        for row in rows:
            print(
                f"| {row['n']:,} | {row['kernel']} | {row['ingest_per_s']:,.0f} items/s "
                f"| {row['exact_ms']:.1f} ms | {row['prefilter_ms']:.1f} ms "
                f"| {row['hybrid_ms']:.1f} ms |"
            )
        runs: dict[str, list[dict[str, float]]] = {kernel: [] for kernel in kernels}
        for _ in range(args.cold_runs):  # the kernels take turns
            for kernel in kernels:
                runs[kernel].append(cold_start(path, kernel))
        texts = corpus(sizes[-1])
        raw_mb = sizes[-1] * D * 4 / 1e6
        text_mb = sum(len(t.encode()) for t in texts) / 1e6
        for kernel, colds in runs.items():
            cold_times = sorted(c["cold_s"] for c in colds)
            print()
            print(
                f"[{kernel}] cold start at {sizes[-1]:,} items (open + first hybrid recall): "
                f"median {statistics.median(cold_times):.2f} s of {args.cold_runs} fresh "
                f"processes ({', '.join(f'{t:.2f}' for t in cold_times)}; open "
                f"{statistics.median(c['open_s'] for c in colds) * 1000:.0f} ms)"
            )
            cold = {
                name: max(c[name] for c in colds)
                for name in ("peak_rss_mb", "base_rss_mb", "anon_mb", "file_mb")
            }
            print(
                f"[{kernel}] memory at {sizes[-1]:,} items (the largest of those processes): "
                f"its own (RssAnon) {cold['anon_mb']:.0f} MB, budget 2x raw + text = "
                f"{2 * raw_mb + text_mb:.0f} MB (raw float32 {raw_mb:.0f} MB, text "
                f"{text_mb:.0f} MB, interpreter and imports {cold['base_rss_mb']:.0f} MB); "
                f"database pages mapped (RssFile) {cold['file_mb']:.0f} MB; peak RSS (VmHWM) "
                f"{cold['peak_rss_mb']:.0f} MB"
            )
        print(f"file size: {path.stat().st_size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
