"""A tenant over 1, 2 and 4 shards ranks LoCoMo's development split as one store does:
vector recall exactly, lexical and hybrid recall within the documented tolerance
(docs/workers.md, "A tenant larger than one object": 0.02 recall@10 and MRR).

Runs when the split is there (``ENGRAMDB_LOCOMO``, or ``../shared/data/locomo/
locomo_dev.json`` beside the repository); skipped otherwise. The first two conversations
(302 questions with evidence), the shipped static embedder, each shard a SQLite file
(``bench.shards``), merged by ``engramdb.shards.merge_hits``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.shards import quality
from eval.embedders import make_embedder
from eval.locomo import load

ROOT = Path(__file__).resolve().parents[2]
DEV = Path(os.environ.get("ENGRAMDB_LOCOMO", ROOT.parent / "shared/data/locomo/locomo_dev.json"))
TOLERANCE = 0.02

pytestmark = pytest.mark.skipif(not DEV.is_file(), reason="LoCoMo's development split is absent")


def test_shards_rank_a_conversation_as_one_store_does(tmp_path: Path) -> None:
    rows = quality(load(DEV)[:2], [2, 4], [10], tmp_path, make_embedder("static"))
    found = {(mode, merge, count): scores for mode, merge, count, _, scores in rows}
    for mode in ("vector", "lexical", "hybrid"):
        one = found[mode, "one store", 1]
        assert one["recall@10"] > 0.6, f"{mode}: the questions hardly find their evidence"
        if mode != "vector":
            assert found[mode, "score", 1] == one  # one shard merges to its own answer
        for count in (2, 4):
            merged = found[mode, "score", count]
            if mode == "vector":
                assert merged == one, f"vector over {count} shards"
                continue
            for metric in ("recall@10", "mrr"):
                assert merged[metric] >= one[metric] - TOLERANCE, (mode, count, metric, merged, one)
