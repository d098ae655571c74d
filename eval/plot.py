"""recall@k curves of ``eval.locomo`` results, as a PNG (matplotlib: the ``eval`` extra).

    python -m eval.plot results.json [--baseline before.json] --out recall.png

One line per mode of ``results.json`` (k = 1 .. 50), and, with ``--baseline``, the same
modes of an earlier run dashed, so that a change of defaults shows as the gap between
the two.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_COLOURS = {"lexical": "tab:blue", "vector": "tab:orange", "hybrid": "tab:green"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.plot")
    parser.add_argument("results", type=Path)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--label", default="defaults of this release")
    parser.add_argument("--baseline-label", default="defaults of 0.1.0")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7.5, 4.8), dpi=120)
    runs: list[tuple[dict[str, Any], str, str]] = []
    if args.baseline:
        runs.append((_load(args.baseline), "--", args.baseline_label))
    runs.append((_load(args.results), "-", args.label))
    for report, style, label in runs:
        for mode, values in report["meta"]["curves"].items():
            axes.plot(
                range(1, len(values) + 1),
                values,
                style,
                color=_COLOURS.get(mode),
                label=f"{mode}, {label}",
            )
    meta = runs[-1][0]["meta"]
    axes.set_title(
        f"LoCoMo {meta['data']}: {meta['questions_scored']} questions (categories 1-4), "
        f"{meta['embedder']}",
        fontsize=9,
    )
    axes.set_xlabel("k (hits read)")
    axes.set_ylabel("recall@k (share of evidence turns found)")
    axes.set_xlim(1, max(len(v) for r, _, _ in runs for v in r["meta"]["curves"].values()))
    axes.set_ylim(0, 1)
    axes.axvline(10, color="grey", linewidth=0.5)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(args.out)
    print(f"wrote {args.out}")
    return 0


def _load(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return report


if __name__ == "__main__":
    raise SystemExit(main())
