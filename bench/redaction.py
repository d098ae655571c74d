"""What redaction on by default costs: a remember and a recall, and ``redact_secrets``
alone on conversation turns.

Run from the repository root::

    PYTHONPATH=core:drivers python -m bench.redaction
    PYTHONPATH=core:drivers python -m bench.redaction --turns PATH/locomo_dev.json \\
        [--versus REV] [--runs 7]

Without ``--turns``: one process, ``InMemoryStore`` + ``HashEmbedder``: per run, 2,000
``remember`` calls of 84-character texts and 300 hybrid recalls, with
``redact=redact_secrets`` (the default) and ``redact=None``, alternating which goes first
over 5 runs; the medians per call, and the cost of ``redact_secrets`` alone on one text
(``timeit``).

With ``--turns``: ``redact_secrets`` on every turn of a LoCoMo-format file (as
``eval.locomo`` remembers it: ``speaker: text`` and the image caption), texts per second,
the median of ``--runs`` passes; with ``--versus REV``, also the ``redact_secrets`` of
``core/engramdb/flows/_redact.py`` at git revision ``REV`` in the same process, the two
alternating pass by pass, and the ratio of their medians.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import time
import timeit
from collections.abc import Callable, Sequence
from pathlib import Path

from engramdb import HashEmbedder, InMemoryStore, Memory, redact_secrets
from eval.redaction import turns

TEXTS = [
    f"Sam note {i}: prefers aisle seats on long flights and books the window on trains"
    for i in range(2000)
]
ROOT = Path(__file__).resolve().parents[1]


def run(redact: object) -> tuple[float, float]:
    """µs per remember, µs per recall."""
    memory = Memory(InMemoryStore(), HashEmbedder(), redact=redact)  # type: ignore[arg-type]
    start = time.perf_counter()
    for text in TEXTS:
        memory.remember(text, ("s",))
    remember = (time.perf_counter() - start) / len(TEXTS) * 1e6
    start = time.perf_counter()
    for text in TEXTS[:300]:
        memory.recall(text[:30], [("s",)])
    return remember, (time.perf_counter() - start) / 300 * 1e6


def memory_costs() -> None:
    results: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    for round_ in range(5):
        for name in ("on", "off") if round_ % 2 == 0 else ("off", "on"):
            results[name].append(run(redact_secrets if name == "on" else None))
    for name, runs in results.items():
        remember = statistics.median(r for r, _ in runs)
        recall = statistics.median(r for _, r in runs)
        print(f"redaction {name}: remember {remember:.1f} µs, hybrid recall {recall:.0f} µs")
    text = TEXTS[0][:84]
    alone = min(timeit.repeat(lambda: redact_secrets(text), number=20_000, repeat=5))
    print(f"redact_secrets on {len(text)} characters: {alone / 20_000 * 1e6:.1f} µs")


def redactor_at(revision: str) -> Callable[[str], str]:
    """``redact_secrets`` as ``core/engramdb/flows/_redact.py`` was at git ``revision``
    (``core/engramdb/_redact.py`` before the core's packages; its relative imports resolve
    against today's package, where the error tree it imports is ``engramdb._base.errors``)."""
    for path in ("flows/_redact.py", "_redact.py"):
        shown = subprocess.run(
            ["git", "show", f"{revision}:core/engramdb/{path}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        if shown.returncode == 0:
            break
    else:
        raise SystemExit(f"no redact_secrets at git revision {revision!r}: {shown.stderr.strip()}")
    source = shown.stdout.replace("from ._errors import", "from engramdb._base.errors import")
    spec = importlib.util.spec_from_loader(f"engramdb._redact_at_{revision}", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "engramdb"
    exec(compile(source, f"{revision}:core/engramdb/{path}", "exec"), module.__dict__)
    redact: Callable[[str], str] = module.redact_secrets
    return redact


def texts_per_second(
    texts: Sequence[str], redactors: dict[str, Callable[[str], str]], runs: int
) -> dict[str, float]:
    """The median over ``runs`` passes of each redactor over ``texts``, alternating which
    goes first."""
    rates: dict[str, list[float]] = {name: [] for name in redactors}
    names = list(redactors)
    for round_ in range(runs):
        for name in names if round_ % 2 == 0 else names[::-1]:
            redact = redactors[name]
            start = time.perf_counter()
            for text in texts:
                redact(text)
            rates[name].append(len(texts) / (time.perf_counter() - start))
    return {name: statistics.median(values) for name, values in rates.items()}


def turn_costs(path: Path, versus: str | None, runs: int) -> None:
    texts = turns(path)
    redactors = {"today": redact_secrets}
    if versus:
        redactors[versus] = redactor_at(versus)
    rates = texts_per_second(texts, redactors, runs)
    print(f"{len(texts)} turns, median of {runs} passes:")
    for name, rate in rates.items():
        print(f"  redact_secrets ({name}): {rate:,.0f} texts per second")
    if versus:
        print(f"  today / {versus}: {rates['today'] / rates[versus]:.2f}x the throughput")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.redaction", description=__doc__)
    parser.add_argument("--turns", type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--versus", help="a git revision whose redact_secrets to time too")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    if args.turns is None:
        memory_costs()
    else:
        turn_costs(args.turns, args.versus, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
