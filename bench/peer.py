"""What a user might write instead of engramdb: SQLite FTS5 for words, numpy for vectors.

The baseline of ``bench.versus`` (issue 28), kept plain and reasonably fast, not a straw man:

* One table ``memories(id, scope, text, vector)``, the vector a float32 blob (one row per
  vector), and an external-content FTS5 table over ``text`` (default ``unicode61``
  tokenizer); ``remember_many`` embeds the texts and writes both in one transaction.
* The vector leg keeps one numpy float32 matrix of unit rows per scope, loaded from the
  file on the scope's first query (``SELECT id, vector ... WHERE scope = ?``, then
  ``np.frombuffer`` of the joined blobs) and dropped when the scope is written.
* ``search``: each leg's best ``leg_k`` (100, engramdb's fusion depth): FTS5 ``bm25()``
  over the query's words joined by OR, and exact cosine (``matrix @ q``,
  ``argpartition``); fused as engramdb's default ``convex`` fusion does: each leg min-max
  normalised over its candidates, weighted 0.4 vector / 0.6 lexical (vector 0 for an
  embedder that declares ``semantic = False``); the texts of the best ``top_k`` are read
  back. No cosine floor, no tie rules, no dates, no revisions.

numpy runs single-threaded (``OPENBLAS_NUM_THREADS`` etc. set to 1 before its import,
unless it was imported already), like engramdb's pure-Python index.
"""

from __future__ import annotations

import os
import re
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

if "numpy" not in sys.modules:  # single-threaded, like engramdb's Python
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import numpy as np

SCHEMA = """
CREATE TABLE IF NOT EXISTS memories(id INTEGER PRIMARY KEY, scope TEXT, text TEXT, vector BLOB);
CREATE INDEX IF NOT EXISTS memories_scope ON memories(scope, id);
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5(text, content='memories', content_rowid='id');
"""
LEXICAL = (
    "SELECT m.id, bm25(words) FROM words JOIN memories m ON m.id = words.rowid "
    "WHERE words MATCH ? AND m.scope = ? ORDER BY bm25(words) LIMIT ?"
)


class Peer:
    def __init__(self, path: str, embedder: Any, leg_k: int = 100) -> None:
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMA)
        self.embedder, self.leg_k = embedder, leg_k
        semantic = getattr(embedder, "semantic", True)
        self.weights = (0.4, 0.6) if semantic else (0.0, 1.0)
        self._matrices: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _unit(self, texts: Sequence[str], kind: str) -> np.ndarray:
        m = np.asarray(self.embedder.embed(texts, kind), dtype=np.float32)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)

    def remember_many(self, texts: Sequence[str], scope: str) -> None:
        batch = getattr(self.embedder, "max_batch", 256)
        vectors = np.concatenate(
            [self._unit(texts[i : i + batch], "document") for i in range(0, len(texts), batch)]
        )
        with self.db:
            start = self.db.execute("SELECT coalesce(max(id), 0) + 1 FROM memories").fetchone()[0]
            rows = [
                (start + i, scope, t, v.tobytes())
                for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
            ]
            self.db.executemany("INSERT INTO memories VALUES (?, ?, ?, ?)", rows)
            self.db.executemany(
                "INSERT INTO words(rowid, text) VALUES (?, ?)", ((r[0], r[2]) for r in rows)
            )
        self._matrices.pop(scope, None)

    def _matrix(self, scope: str) -> tuple[np.ndarray, np.ndarray]:
        if scope not in self._matrices:
            rows = self.db.execute(
                "SELECT id, vector FROM memories WHERE scope = ? ORDER BY id", (scope,)
            ).fetchall()
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            flat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
            self._matrices[scope] = (ids, flat.reshape(len(rows), -1))
        return self._matrices[scope]

    def vector_leg(self, query: str, scope: str, k: int) -> list[tuple[int, float]]:
        ids, matrix = self._matrix(scope)
        scores = matrix @ self._unit([query], "query")[0]
        top = np.argpartition(-scores, k)[:k] if len(scores) > k else np.arange(len(scores))
        top = top[np.argsort(-scores[top])]
        return list(zip(ids[top].tolist(), scores[top].tolist(), strict=True))

    def lexical_leg(self, query: str, scope: str, k: int) -> list[tuple[int, float]]:
        words = " OR ".join(f'"{w}"' for w in re.findall(r"\w+", query.lower()))
        rows = self.db.execute(LEXICAL, (words, scope, k)).fetchall() if words else []
        return [(i, -score) for i, score in rows]

    def search(self, query: str, scope: str, top_k: int = 10) -> list[tuple[int, float, str]]:
        legs = self.vector_leg(query, scope, self.leg_k), self.lexical_leg(query, scope, self.leg_k)
        fused: dict[int, float] = {}
        for weight, leg in zip(self.weights, legs, strict=True):
            if leg:
                high, low = leg[0][1], leg[-1][1]
                for i, score in leg:
                    norm = (score - low) / (high - low) if high > low else 1.0
                    fused[i] = fused.get(i, 0.0) + weight * norm
        best = sorted(fused.items(), key=lambda p: -p[1])[:top_k]
        marks = ",".join("?" * len(best))
        texts = dict(
            self.db.execute(
                f"SELECT id, text FROM memories WHERE id IN ({marks})", [i for i, _ in best]
            )
        )
        return [(i, score, texts[i]) for i, score in best]

    def close(self) -> None:
        self.db.close()
