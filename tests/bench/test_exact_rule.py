"""``bench.exact_rule`` (the exact scan against the approximate path of the pure-Python
index): a small run reports a row per size and k with recalls that are fractions and
the rule's answer: the exact scan only where the approximate path would score every
vector exactly anyway. Checks the report, never timings."""

from __future__ import annotations

import re

import pytest

from bench import exact_rule


def test_a_small_run_reports_each_size_and_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert exact_rule.main(["--d", "64", "--sizes", "120,1200"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# d=64, 20 queries")
    rows = re.findall(
        r"^\| ([\d,]+) \| (\d+) \| ([\d,]+) \| [\d.]+ ms \| [\d.]+ ms \| ([\d.]+) \| ([\d.]+) "
        r"\| (True|False) \|$",
        out,
        re.M,
    )
    assert [(n, k, rule) for n, k, _, _, _, rule in rows] == [
        ("120", "10", "False"),
        ("120", "100", "True"),  # 120 <= 150: the approximate path would score all exactly
        ("1,200", "10", "False"),
        ("1,200", "100", "False"),
    ]
    assert all(0.0 <= float(r) <= 1.0 for *_, top10, topk, _ in rows for r in (top10, topk))


def test_the_store_run_reports_both_rules(capsys: pytest.CaptureFixture[str]) -> None:
    """``--store``: a row per size and embedder with both rules' medians and how many of
    its 50 queries got the same hybrid top 10 (a scope of 120 is exact under both rules,
    so every one)."""
    assert exact_rule.main(["--store", "--sizes", "120"]) == 0
    out = capsys.readouterr().out
    rows = re.findall(
        r"^\| 120 \| (.+?) \| .* ms \(.*x\) \| .* ms \(.*x\) \| (\d+) of 50 \|$", out, re.M
    )
    assert rows == [("projection d=384", "50"), ("hash d=768", "50")]
