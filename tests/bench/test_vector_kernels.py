"""``bench.vector_kernels`` (the two vector kernels side by side): a small run reports
both kernels at both sizes and the ``--wider`` sweep, the numpy kernel's exact answers
equal to the pure-Python ones (the bench raises otherwise). Checks the report, never
timings."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("numpy")

from bench import vector_kernels


@pytest.mark.parametrize("data", ["clustered", "projection"])
def test_a_small_run_reports_both_kernels_and_the_sweep(
    data: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--quick", "--queries", "3", "--loads", "1", "--wider", "1,4", "--data", data]
    assert vector_kernels.main(argv) == 0
    out = capsys.readouterr().out
    assert f"{data} data" in out
    for n in ("2,000", "10,000"):
        for k in (100, 10):  # both recall@10 columns, each a fraction of the exact top 10
            row = re.search(rf"^\| {n} \|.*\| {k} \|.* \| ([\d.]+) \| ([\d.]+) \|$", out, re.M)
            assert row and all(0.0 <= float(cell) <= 1.0 for cell in row.groups())
    swept = re.findall(r"^\| ([\d,]+) \| ([\d,]+) \((\d)x\) \|.*\| ([\d.]+) \|$", out, re.M)
    assert [(n, multiple) for n, _, multiple, _ in swept] == [
        ("2,000", "1"),
        ("2,000", "4"),
        ("10,000", "1"),
        ("10,000", "4"),
    ]
    assert all(0.0 <= float(recall) <= 1.0 for *_, recall in swept)
