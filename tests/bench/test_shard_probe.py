"""``bench.shard_probe``: vector recall over four shards ranks the probe as one store
does (a cosine does not depend on the other memories). Checks figures against each
other, never a fixed figure."""

from __future__ import annotations

from bench import shard_probe
from eval import probe as probes


def test_one_shard_is_one_store_and_vector_recall_does_not_move_over_four() -> None:
    probe = probes.load("people", holders=4, facts=6)
    one = shard_probe.top1("people", 1, 1, probe)
    four = shard_probe.top1("people", 4, 4, probe)
    assert one["scoped"][0] > 0.3
    assert {s: v for s, (v, _) in one.items()} == {s: v for s, (v, _) in four.items()}
