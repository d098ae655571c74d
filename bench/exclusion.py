"""What finding the eligible positions costs when a search excludes a scope's expired
memories (``engramdb._vectors.exact.eligible_positions`` with ``Excluding``), against the two
ways it was done before.

Run from the repository root: ``PYTHONPATH=core python -m bench.exclusion``. For 10,000
and 100,000 keys and 1 to 5,000 excluded ones, it prints the best of 7 x 10 calls (ms
per call) of: a Python container call per key (before 9c9ddf0), deleting each excluded
position from the list of all (9c9ddf0), and the function as it is now. Each answer is
checked against the others first.
"""

from __future__ import annotations

import timeit
from collections.abc import Callable, Sequence

from engramdb._vectors.exact import Excluding, eligible_positions


def per_key(excluded: Excluding, keys: Sequence[str]) -> list[int]:
    return [p for p, key in enumerate(keys) if key in excluded]


def deleting(excluded: Excluding, positions: dict[str, int], n: int) -> list[int]:
    gone = sorted({p for p in map(positions.get, excluded.excluded) if p is not None})
    eligible = list(range(n))
    for p in reversed(gone):
        del eligible[p]
    return eligible


def _methods(excluded: Excluding, keys: list[str]) -> dict[str, Callable[[], list[int] | None]]:
    positions = {key: p for p, key in enumerate(keys)}
    return {
        "per key": lambda: per_key(excluded, keys),
        "deleting": lambda: deleting(excluded, positions, len(keys)),
        "now": lambda: eligible_positions(excluded, keys, positions),
    }


def main() -> None:
    print("| keys, excluded | a Python call per key | deleting each | now |")
    print("|---|---|---|---|")
    for n in (10_000, 100_000):
        keys = [f"k{i:06d}" for i in range(n)]
        for m in (1, 100, 1_000, 5_000):
            methods = _methods(Excluding(set(keys[:: n // m][:m])), keys)
            answers = [method() for method in methods.values()]
            assert all(answer == answers[0] for answer in answers), "the methods disagree"
            ms = [min(timeit.repeat(f, number=10, repeat=7)) / 10 * 1000 for f in methods.values()]
            print(f"| {n:,}, {m:,} | " + " | ".join(f"{t:.2f}" for t in ms) + " |", flush=True)


if __name__ == "__main__":
    main()
