"""PostgresStore at 100k and 1M vectors: ingest, HNSW recall against exact, SqliteStore beside it.

Run from the repository root (needs numpy, the postgres extra, and the PostgreSQL +
pgvector of ``bash .ci/setup-postgres`` unless ``PG_DSN`` names a server whose role may
CREATE DATABASE)::

    PYTHONPATH=core:drivers python bench/postgres_scale.py --sizes 100000,1000000
    PYTHONPATH=core:drivers python bench/postgres_scale.py --quick        # 5,000: smoke run

Without ``PG_DSN`` it starts its own PostgreSQL 15 + pgvector (``tests/postgres/pg_server``)
with :data:`SERVER_SETTINGS`, and stops it at the end. For each size N (a fresh database
each):

* Data: N clustered unit vectors, d=384, float32, seeded and generated in chunks of
  2,000 (Python memory stays bounded): 1,000 random unit centres, each with its own
  random 16-dimensional subspace; a point is ``normalize(centre + B_c z + e)`` with
  ``|B_c z| ~ 1`` (cosine to its centre about 0.7) and a small isotropic ``e`` (norm
  about 0.1), so neighbourhoods have a low intrinsic dimension like a text model's
  (iid uniform vectors are the pathological case for HNSW). Texts are short ("note
  <i>: " and 6-10 words). Queries: ``normalize(x_i + 0.3 N(0, I/d))`` of random stored
  points.
* Store ingest (N <= ``--store-max``): ``PostgresStore.batch`` of ``--batch`` PutItem
  and as many PutVector ops per transaction, the way ``remember_many`` writes, into a
  space registered first (so every vector goes into the live HNSW index).
* Bulk load (every N): the store migrates and registers the space, then the bench
  drops the space's index, COPYs the rows the store would write (items as text COPY,
  vectors as binary COPY), ANALYZEs and builds the index again with the store's exact
  definition. Its figures are labelled "bulk": this is not a store API.
* Recall: ``SearchVectors`` (k=10) through a ``PostgresStore`` with ``exact=True`` (the
  ground truth and the exact baseline) and through the HNSW index at each
  ``--ef-search`` (the first is the store's default, 100; pgvector's own is 40); p50/p95 over the
  queries (median over ``--repeats`` passes; exact once), recall@10 against exact.
  Beside it: the index statement alone (the nearest-hashes query of ``_search``), and
  the coverage count every search runs first.
* SqliteStore (N <= ``--sqlite-max``): the same ops into a file, its exact and default
  searches, recall@10 against its own exact.

``--k 100`` times index searches of k=100 (recall@10 of their first 10). To compare two
trees on one index (HNSW builds differ from run to run: each node's level is drawn at
random), build it once with ``--keep`` on a server ``PG_DSN`` names, then run each tree
with ``--reuse --store-max 0 --sqlite-max 0`` (``PYTHONPATH=<tree>/core:<tree>/drivers``),
alternately.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "postgres"))
import pg_server  # tests/postgres, on the path above

from engramdb._base.types import EmbeddingSpace, MemoryRecord
from engramdb._lexical.bm25 import terms
from engramdb.postgres import PostgresStore
from engramdb.postgres._coverage import selected
from engramdb.postgres._sql import hnsw_ddl, hnsw_index, scope_condition, sql_literal
from engramdb.sqlite import SqliteStore
from engramdb.store import (
    PutItem,
    PutVector,
    RegisterSpace,
    RepairVectors,
    ScopeSet,
    SearchVectors,
)
from engramdb.store.rows import ITEM_COLUMNS, item_row, scope_path

D = 384
CHUNK = 2_000
CLUSTERS = 1_000
THEMES = 30  # --data graded: each centre near one of 30 themes (cosine about 0.8)
RANK = 16
SCOPE = ("bench", "user", "u1")
SPACE = EmbeddingSpace("bench", "clustered", D)
NOW = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = [f"w{i:03d}" for i in range(3_000)]

SERVER_SETTINGS = {
    "shared_buffers": "4GB",  # 1M x 384 floats is 1.6 GB of table, the graph about 2 GB more
    "maintenance_work_mem": "4GB",  # the whole HNSW graph is built in memory
    "max_parallel_maintenance_workers": "1",  # the index build: leader + 1 worker
    "max_parallel_workers_per_gather": "0",  # exact scans on one core
    "work_mem": "64MB",
    "effective_cache_size": "12GB",
    "max_wal_size": "8GB",
    "checkpoint_timeout": "30min",
}
"""Beside pg_server's own (fsync=off): a 2-core, 24 GiB machine shared with other jobs."""


# -- data ---------------------------------------------------------------------------------


class Corpus:
    """The vectors and texts of items 0..n-1, regenerated on demand chunk by chunk."""

    def __init__(self, seed: int, data: str = "graded") -> None:
        rng = np.random.default_rng([seed, 0])
        centres = rng.standard_normal((CLUSTERS, D))
        if data == "graded":  # topics within themes: sibling centres share a theme
            themes = rng.standard_normal((THEMES, D)) / np.sqrt(D)
            centres = centres * (0.8 / np.sqrt(D)) + themes[rng.integers(THEMES, size=CLUSTERS)]
        self._centres = (centres / np.linalg.norm(centres, axis=1, keepdims=True)).astype("f4")
        scale = 1.0 / np.sqrt(D * RANK)
        self._bases = (rng.standard_normal((CLUSTERS, RANK, D)) * scale).astype("f4")
        self._seed = seed

    def chunk(self, number: int) -> np.ndarray:
        """The unit float32 vectors of items ``number*CHUNK`` .. ``+CHUNK``."""
        rng = np.random.default_rng([self._seed, 1, number])
        labels = rng.integers(CLUSTERS, size=CHUNK)
        z = rng.standard_normal((CHUNK, RANK)).astype("f4")
        x = self._centres[labels] + np.einsum("nr,nrd->nd", z, self._bases[labels])
        x += rng.standard_normal((CHUNK, D)).astype("f4") * (0.1 / np.sqrt(D))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype("<f4")

    def chunks(self, n: int) -> Iterator[tuple[int, np.ndarray]]:
        """(first item number, vectors) of items 0..n-1."""
        for number in range(-(-n // CHUNK)):
            start = number * CHUNK
            yield start, self.chunk(number)[: n - start]

    def queries(self, n: int, count: int, seed: int) -> np.ndarray:
        """``count`` perturbed stored points."""
        rng = np.random.default_rng([seed, 2])
        picks = sorted(int(i) for i in rng.choice(n, size=count, replace=False))
        points = np.stack([self.chunk(i // CHUNK)[i % CHUNK] for i in picks]).astype("f8")
        points += rng.standard_normal(points.shape) * (0.3 / np.sqrt(D))
        return points / np.linalg.norm(points, axis=1, keepdims=True)


def text_of(i: int) -> str:
    rng = np.random.default_rng([7, i])
    return f"note {i}: " + " ".join(WORDS[int(w)] for w in rng.integers(3_000, size=6 + i % 5))


def record_of(i: int) -> MemoryRecord:
    text = text_of(i)
    return MemoryRecord(
        id=f"bench-{i:08d}",
        scope=SCOPE,
        text=text,
        created_at=NOW,
        updated_at=NOW,
        content_sha256=hashlib.sha256(text.encode()).hexdigest(),
    )


# -- ingest ---------------------------------------------------------------------------------


def ingest_store(
    store: Any, corpus: Corpus, n: int, batch: int, *, with_vectors: bool = True, drop: str = ""
) -> dict[str, float]:
    """PutItem + PutVector through ``store.batch``, ``batch`` items per transaction
    (``with_vectors=False``: PutItem only; ``drop``: a statement run after RegisterSpace)."""
    store.batch([RegisterSpace(SPACE, NOW)])
    if drop:
        with psycopg.connect(store._dsn, autocommit=True) as conn:
            conn.execute(drop)
    rates: list[float] = []
    cpu = time.process_time()
    start = time.perf_counter()
    for first, vectors in corpus.chunks(n):
        for offset in range(0, len(vectors), batch):
            ops: list[Any] = []
            records = [
                record_of(first + offset + j) for j in range(len(vectors[offset : offset + batch]))
            ]
            ops += [PutItem(r, NOW) for r in records]
            ops += [
                PutVector(SPACE.id, r.content_sha256, v.tobytes(), NOW)
                for r, v in zip(records, vectors[offset : offset + batch], strict=True)
                if with_vectors
            ]
            began = time.perf_counter()
            store.batch(ops)
            rates.append(len(records) / (time.perf_counter() - began))
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    tenth = max(1, len(rates) // 10)
    return {
        "seconds": elapsed,
        "items_per_s": n / elapsed,
        "client_cpu_share": cpu / elapsed,
        "first_tenth_per_s": statistics.median(rates[:tenth]),
        "last_tenth_per_s": statistics.median(rates[-tenth:]),
    }


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)


def _vector_rows(hashes: Sequence[str], vectors: np.ndarray) -> bytes:
    """Binary COPY tuples (space_id, content_sha256, embedding, embedded_at): pgvector's
    binary form is int16 dimensions, int16 unused, float4s, all big-endian."""
    space = SPACE.id.encode()
    dtype = np.dtype(
        [("fields", ">i2"), ("l1", ">i4"), ("space", f"S{len(space)}"), ("l2", ">i4"),
         ("sha", "S64"), ("l3", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("values", ">f4", D),
         ("l4", ">i4"), ("at", ">i8")]
    )  # fmt: skip
    rows = np.zeros(len(hashes), dtype=dtype)
    rows["fields"], rows["l1"], rows["space"] = 4, len(space), space
    rows["l2"], rows["sha"] = 64, [h.encode() for h in hashes]
    rows["l3"], rows["dim"], rows["values"] = 4 + 4 * D, D, vectors
    rows["l4"], rows["at"] = 8, int(NOW.timestamp() * 1000)
    return rows.tobytes()


def index_ddl() -> str:
    """The store's index of the space, as ``_items._register_space`` creates it."""
    ddl = hnsw_ddl(SPACE.id, D)
    assert ddl is not None
    return ddl


def ingest_bulk(dsn: str, corpus: Corpus, n: int) -> dict[str, float]:
    """The store's schema and space, then COPY of its rows and the index built last."""
    with PostgresStore(dsn) as store:
        store.batch([RegisterSpace(SPACE, NOW)])
    items_sql = (
        f"COPY engramdb_items ({', '.join(ITEM_COLUMNS)}, scope_path, terms, term_count) FROM STDIN"
    )
    vectors_sql = (
        "COPY engramdb_vectors (space_id, content_sha256, embedding, embedded_at) "
        "FROM STDIN (FORMAT BINARY)"
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {hnsw_index(SPACE.id)}")
        start = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur:
            with cur.copy(items_sql) as copy:
                for first, vectors in corpus.chunks(n):
                    for i in range(first, first + len(vectors)):
                        record = record_of(i)
                        words = terms(record.text)
                        copy.write_row([*item_row(record), scope_path(SCOPE), words, len(words)])
            with cur.copy(vectors_sql) as copy:
                copy.write(_COPY_HEADER)
                for first, vectors in corpus.chunks(n):
                    hashes = [
                        record_of(i).content_sha256 for i in range(first, first + len(vectors))
                    ]
                    copy.write(_vector_rows(hashes, vectors))
                copy.write(struct.pack(">h", -1))
        copied = time.perf_counter() - start
        began = time.perf_counter()
        conn.execute("ANALYZE engramdb_items")
        conn.execute("ANALYZE engramdb_vectors")
        analyzed = time.perf_counter() - began
        began = time.perf_counter()
        conn.execute(index_ddl())
        built = time.perf_counter() - began
    began = time.perf_counter()
    with PostgresStore(dsn) as store:  # a repair scan counts the rows loaded around it
        store.batch([RepairVectors(SPACE.id, 1)])
    counted = time.perf_counter() - began
    total = copied + analyzed + built + counted
    return {
        "copy_s": copied,
        "analyze_s": analyzed,
        "index_s": built,
        "count_s": counted,
        "seconds": total,
        "items_per_s": n / total,
        "copy_items_per_s": n / copied,
    }


def sizes_of(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        (row,) = conn.execute(
            "SELECT pg_database_size(current_database()), "
            "pg_total_relation_size('engramdb_items'), pg_table_size('engramdb_vectors'), "
            f"pg_relation_size('{hnsw_index(SPACE.id)}')"
        ).fetchall()
    return dict(zip(("database", "items", "vectors_table", "hnsw_index"), row, strict=True))


# -- recall -----------------------------------------------------------------------------------


@dataclass
class Timed:
    ids: list[list[str]]
    latencies: list[float]


def search_all(store: Any, queries: np.ndarray, *, exact: bool, k: int = 10) -> Timed:
    ids: list[list[str]] = []
    latencies: list[float] = []
    for query in queries:
        op = SearchVectors(ScopeSet(exact=(SCOPE,)), SPACE.id, tuple(query.tolist()), k, NOW, exact)
        start = time.perf_counter()
        (result,) = store.batch([op])
        latencies.append(time.perf_counter() - start)
        ids.append([hit.record.id for hit in result.hits])
    return Timed(ids, latencies)


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def recall_at_10(found: list[list[str]], truth: list[list[str]]) -> float:
    """How many of each exact top 10 the first 10 found hold, over all queries."""
    hits = sum(len(set(f[:10]) & set(t)) for f, t in zip(found, truth, strict=True))
    return hits / sum(len(t) for t in truth)


def measure(
    make_store: Any, queries: np.ndarray, truth: Timed, repeats: int, warm: int = 20, k: int = 10
) -> dict[str, float]:
    with make_store() as store:
        search_all(store, queries[:warm], exact=False, k=k)
        passes = [search_all(store, queries, exact=False, k=k) for _ in range(repeats)]
    return {
        "p50_ms": statistics.median(percentile(p.latencies, 50) for p in passes) * 1000,
        "p95_ms": statistics.median(percentile(p.latencies, 95) for p in passes) * 1000,
        "recall_at_10": recall_at_10(passes[0].ids, truth.ids),
    }


def statement_alone(dsn: str, queries: np.ndarray, ef_search: int) -> dict[str, float]:
    """The nearest-hashes statement of ``_search`` and its coverage count, each alone."""
    eligible = "i.scope_key = ANY(%s) AND (i.expires_at IS NULL OR i.expires_at > %s)"
    from engramdb._base.types import scope_key

    params = ([scope_key(SCOPE)], int(NOW.timestamp() * 1000))
    nearest = (
        f"SELECT v.content_sha256 FROM engramdb_vectors v WHERE v.space_id = "
        f"{sql_literal(SPACE.id)} AND EXISTS (SELECT 1 FROM engramdb_items i WHERE "
        f"i.content_sha256 = v.content_sha256 AND {eligible}) "
        f"ORDER BY v.embedding::vector({D}) <=> %s::vector({D}) LIMIT 10"
    )
    in_scopes, scope_params = scope_condition(ScopeSet(exact=(SCOPE,)))
    count = selected(in_scopes, scope_params, SPACE.id)
    with psycopg.connect(dsn) as conn:
        conn.execute("SET hnsw.iterative_scan = strict_order")
        conn.execute(f"SET hnsw.ef_search = {int(ef_search)}")
        text = "[" + ",".join(repr(float(v)) for v in queries[0]) + "]"
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + nearest, (*params, text)))
        if hnsw_index(SPACE.id) not in plan:
            raise RuntimeError(f"the nearest-hashes statement does not use the index:\n{plan}")
        near_s: list[float] = []
        count_s: list[float] = []
        for query in queries:
            text = "[" + ",".join(repr(float(v)) for v in query) + "]"
            start = time.perf_counter()
            conn.execute(nearest, (*params, text)).fetchall()
            near_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            conn.execute(count.sql, count.params).fetchall()
            count_s.append(time.perf_counter() - start)
    return {
        "nearest_p50_ms": percentile(near_s, 50) * 1000,
        "nearest_p95_ms": percentile(near_s, 95) * 1000,
        "count_p50_ms": percentile(count_s, 50) * 1000,
    }


def ingest_breakdown(admin_dsn: str, n: int, args: argparse.Namespace) -> None:
    """Where the store's ingest time goes: items and vectors with the live index (as
    users write), without the index, and items alone; the client's CPU share of each."""
    corpus = Corpus(args.seed, args.data)
    ways = {
        "items + vectors, live HNSW index": {},
        "items + vectors, no index": {"drop": f"DROP INDEX {hnsw_index(SPACE.id)}"},
        "items only": {"with_vectors": False},
    }
    report: dict[str, Any] = {"breakdown n": n}
    for way, options in ways.items():
        dsn = pg_server.create_database(admin_dsn, "engramdb_bench_why")
        with PostgresStore(dsn) as store:
            report[way] = ingest_store(store, corpus, n, args.batch, **options)
        pg_server.drop_database(admin_dsn, "engramdb_bench_why")
    emit(report, args.out)


def numpy_truth(corpus: Corpus, n: int, queries: np.ndarray) -> list[list[str]]:
    """The exact top 10 of each query by cosine, from the generated vectors (for sizes
    where ``exact=True`` through the store takes seconds a query)."""
    q = queries.astype("f4")
    best = np.full((len(q), 10), -2.0, dtype="f4")
    index = np.zeros((len(q), 10), dtype=np.int64)
    for start, vectors in corpus.chunks(n):
        sims = q @ vectors.T
        scores = np.concatenate([best, sims], axis=1)
        numbers = np.concatenate(
            [index, np.broadcast_to(np.arange(start, start + len(vectors)), sims.shape)], axis=1
        )
        top = np.argpartition(-scores, 9, axis=1)[:, :10]
        best = np.take_along_axis(scores, top, axis=1)
        index = np.take_along_axis(numbers, top, axis=1)
    return [[f"bench-{int(i):08d}" for i in row] for row in index]


def recall_postgres(
    dsn: str,
    queries: np.ndarray,
    ef_values: Sequence[int],
    repeats: int,
    truth_ids: list[list[str]] | None = None,
    k: int = 10,
) -> tuple[dict[str, Any], list[list[str]]]:
    with PostgresStore(dsn) as store:
        search_all(store, queries[:5], exact=True)
        if truth_ids is None:
            truth = search_all(store, queries, exact=True)
        else:  # exact=True timed on 10 queries only; the truth from numpy
            truth = Timed(truth_ids, search_all(store, queries[:10], exact=True).latencies)
    out: dict[str, Any] = {
        "exact": {
            "p50_ms": percentile(truth.latencies, 50) * 1000,
            "p95_ms": percentile(truth.latencies, 95) * 1000,
            "recall_at_10": 1.0,
        }
    }
    for ef in ef_values:
        out[f"hnsw ef_search={ef}" + ("" if k == 10 else f", k={k}")] = measure(
            lambda ef=ef: PostgresStore(dsn, ef_search=ef), queries, truth, repeats, k=k
        )
    out["statement alone"] = statement_alone(dsn, queries, ef_values[0])
    return out, truth.ids


def run_sqlite(
    corpus: Corpus, n: int, queries: np.ndarray, args: argparse.Namespace
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        path = Path(tmp) / "bench.db"
        with SqliteStore(path) as store:
            ingest = ingest_store(store, corpus, n, args.batch)
        size = path.stat().st_size + sum(p.stat().st_size for p in Path(tmp).glob("bench.db-*"))
        with SqliteStore(path) as store:
            search_all(store, queries[:5], exact=True)
            truth = search_all(store, queries, exact=True)
        result = measure(lambda: SqliteStore(path), queries, truth, args.repeats)
    return {
        "ingest": ingest,
        "file_bytes": size,
        "exact": {
            "p50_ms": percentile(truth.latencies, 50) * 1000,
            "p95_ms": percentile(truth.latencies, 95) * 1000,
        },
        "default": result,
        "truth_ids": truth.ids,
    }


# -- driver -----------------------------------------------------------------------------------


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def emit(report: dict[str, Any], path: Path | None) -> None:
    print(json.dumps(report, indent=1), flush=True)
    if path is not None:
        with path.open("a") as out:
            out.write(json.dumps(report) + "\n")


def run_size(admin_dsn: str, n: int, args: argparse.Namespace) -> None:
    corpus = Corpus(args.seed, args.data)
    queries = corpus.queries(n, args.queries, args.seed)
    ef_values = [int(v) for v in args.ef_search.split(",")]
    report: dict[str, Any] = {"n": n, "d": D, "queries": len(queries), "repeats": args.repeats}
    if n <= args.store_max:
        name = f"engramdb_bench_store_{n}"
        dsn = pg_server.create_database(admin_dsn, name)
        with PostgresStore(dsn) as store:
            report["store ingest"] = ingest_store(store, corpus, n, args.batch)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE")
        report["store sizes"] = sizes_of(dsn)
        report["store recall"], _ = recall_postgres(dsn, queries, ef_values, args.repeats)
        emit({"n": n, "partial": "store", **report}, args.out)
        pg_server.drop_database(admin_dsn, name)
    name = f"engramdb_bench_bulk_{n}"
    if args.reuse:  # the database a run with --keep left (same --seed, --data and n)
        dsn = pg_server.database_dsn(admin_dsn, name)
    else:
        dsn = pg_server.create_database(admin_dsn, name)
        report["bulk ingest"] = ingest_bulk(dsn, corpus, n)
        emit({"n": n, "partial": "bulk ingest", "bulk ingest": report["bulk ingest"]}, args.out)
    report["bulk sizes"] = sizes_of(dsn)
    given = numpy_truth(corpus, n, queries) if args.numpy_truth else None
    report["bulk recall"], truth = recall_postgres(
        dsn, queries, ef_values, args.repeats, given, k=args.k
    )
    if not args.keep:
        pg_server.drop_database(admin_dsn, name)
    if n <= args.sqlite_max:
        sqlite = run_sqlite(corpus, n, queries, args)
        sqlite["exact agrees with postgres exact (recall@10)"] = recall_at_10(
            sqlite.pop("truth_ids"), truth
        )
        report["sqlite"] = sqlite
    report["peak_rss_mib"] = peak_rss_mib()
    emit(report, args.out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ef-search", default="100,40,200")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--store-max", type=int, default=100_000)
    parser.add_argument("--sqlite-max", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--data",
        choices=("graded", "islands"),
        default="graded",
        help="graded: 1,000 topic centres near 30 themes; islands: 1,000 unrelated centres",
    )
    parser.add_argument("--tmp", default=None, help="directory for the SQLite file")
    parser.add_argument("--out", type=Path, default=None, help="append JSON lines here")
    parser.add_argument("--keep", action="store_true", help="keep the bulk databases")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="search the bulk databases a run with --keep left on PG_DSN's server (no ingest)",
    )
    parser.add_argument(
        "--k", type=int, default=10, help="the index searches' k (recall@10: their first 10)"
    )
    parser.add_argument("--why", type=int, default=0, help="only the ingest breakdown at N")
    parser.add_argument("--quick", action="store_true", help="5,000 items, 50 queries")
    parser.add_argument(
        "--numpy-truth",
        action="store_true",
        help="bulk recall against numpy's exact top 10 (exact=True timed on 10 queries)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.repeats = "5000", 50, 1
    print(
        f"# {platform.python_version()}, numpy {np.__version__}, psycopg {psycopg.__version__},"
        f" {os.cpu_count()} cpus, load {os.getloadavg()}",
        flush=True,
    )
    with pg_server.admin_dsn(SERVER_SETTINGS) as admin_dsn:
        with psycopg.connect(admin_dsn) as conn:
            print("#", conn.execute("SELECT version()").fetchone()[0], flush=True)
            vector = "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
            print("# pgvector", conn.execute(vector).fetchone()[0], flush=True)
        if args.why:
            ingest_breakdown(admin_dsn, args.why, args)
        for n in (int(s) for s in args.sizes.split(",") if not args.why):
            run_size(admin_dsn, n, args)
    print(f"# load at the end {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
