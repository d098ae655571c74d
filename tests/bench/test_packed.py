"""``bench.packed`` (what packed segments cost the writes): a small run packs the scope as
it is written (and maintenance packs an unpacked copy), forgets delete segments that the
next pass packs again. Checks the report, never timings."""

from __future__ import annotations

import re

import pytest

from bench import packed


def test_a_small_run_packs_the_scope_and_repacks_the_holes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert packed.main(["--n", "4200", "--writes", "2"]) == 0
    out = capsys.readouterr().out
    ingest = r"^ingest: packed as written \d+ ms CPU, unpacked \d+ ms \([\d.]+x\)$"
    assert re.search(ingest, out, re.M)
    # 4,200 fit one bounded pass (7 segments of 651 at d=384), then a pass packs nothing
    assert "pack by maintain(): 4,200 vectors in 2 passes" in out
    segments = re.search(r"\((\d+) segments before\)", out)
    assert segments and int(segments.group(1)) == 6 - 2  # 6 packed as written, 2 forgotten
    assert re.search(r"^packed: remember [\d.]+ ms, forget [\d.]+ ms", out, re.M)
    assert re.search(r"^plain: remember [\d.]+ ms, forget [\d.]+ ms", out, re.M)
    repack = re.search(r"^repack: ([\d,]+) vectors of 2 holes", out, re.M)
    assert repack and int(repack.group(1).replace(",", "")) > 0
