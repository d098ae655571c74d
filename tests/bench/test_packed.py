"""``bench.packed`` (what packed segments cost the writes): a small run packs the whole
scope, forgets delete segments that the next pass packs again. Checks the report, never
timings."""

from __future__ import annotations

import re

import pytest

from bench import packed


def test_a_small_run_packs_the_scope_and_repacks_the_holes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert packed.main(["--n", "4200", "--writes", "2"]) == 0
    out = capsys.readouterr().out
    assert "pack: 4,200 vectors" in out
    assert re.search(r"^packed: remember [\d.]+ ms, forget [\d.]+ ms", out, re.M)
    assert re.search(r"^plain: remember [\d.]+ ms, forget [\d.]+ ms", out, re.M)
    repack = re.search(r"^repack: ([\d,]+) vectors of 2 holes", out, re.M)
    assert repack and int(repack.group(1).replace(",", "")) > 0
