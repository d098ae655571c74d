"""What packed vector segments cost the writes: packing as written, a remember, a forget,
maintenance's packing.

Run from the repository root::

    PYTHONPATH=core:drivers python -m bench.packed            # 100k memories, d=384
    PYTHONPATH=core:drivers python -m bench.packed --n 20000

Builds one scope of ``--n`` memories with ``bench.memory``'s ``ProjectionEmbedder``
(d=384) twice, 5,000 a ``remember_many`` call, interleaved call by call: into one file
the writes pack the scope as they go (the default), into the other they do not (the
baseline: ``run_batch`` with ``pack_from=None``). It reports the CPU time of both
ingests; of the ``maintain()`` passes that pack a copy of the unpacked file (a few
segments a pass); of ``--writes`` single remembers into each file (new ids, past every
segment's range), interleaved; of as many forgets of old memories (each deletes the
~1 MB segment that held it, zeroed by ``secure_delete``); and of a ``maintain()`` pass
that re-packs those holes against one with nothing to pack. Medians; the machine is
shared, so compare within a run.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from bench.memory import SCOPE, ProjectionEmbedder, corpus
from engramdb import MaintenanceReport, Memory
from engramdb.sqlite import SqliteStore
from engramdb.store._sqlite import batch


def cpu_ms(action: Callable[[], object]) -> float:
    started = time.process_time()
    action()
    return 1000 * (time.process_time() - started)


@contextlib.contextmanager
def unpacked() -> Iterator[None]:
    """Writes that do not pack (the baseline): ``run_batch``'s ``pack_from`` None."""
    defaults = batch.run_batch.__kwdefaults__
    saved = defaults["pack_from"]
    defaults["pack_from"] = None
    try:
        yield
    finally:
        defaults["pack_from"] = saved


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.packed", description=__doc__)
    parser.add_argument("--n", type=int, default=100_000, help="memories in the scope")
    parser.add_argument("--writes", type=int, default=9, help="remembers and forgets each")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        packed_path, plain_path = Path(tmp, "packed.db"), Path(tmp, "plain.db")
        memory = Memory(SqliteStore(packed_path), ProjectionEmbedder())
        plain = Memory(SqliteStore(plain_path), ProjectionEmbedder())
        texts = corpus(args.n)
        ingest = {"packed": 0.0, "plain": 0.0}
        for start in range(0, len(texts), 5000):
            chunk = [{"text": t, "scope": SCOPE} for t in texts[start : start + 5000]]
            ingest["packed"] += cpu_ms(lambda c=chunk: memory.remember_many(c))
            with unpacked():
                ingest["plain"] += cpu_ms(lambda c=chunk: plain.remember_many(c))
        plain.close()
        repacked_path = Path(tmp, "repacked.db")
        shutil.copyfile(plain_path, repacked_path)
        print(f"# n={args.n:,}, d=384, Python {sys.version.split()[0]}")
        print(
            f"ingest: packed as written {ingest['packed']:.0f} ms CPU, unpacked "
            f"{ingest['plain']:.0f} ms ({ingest['packed'] / ingest['plain']:.2f}x)"
        )
        repacking = Memory(SqliteStore(repacked_path), ProjectionEmbedder())
        passes: list[MaintenanceReport] = []
        pack_ms = cpu_ms(lambda: passes.extend(_until_packed(repacking)))
        repacking.close()
        print(
            f"pack by maintain(): {sum(r.packed for r in passes):,} vectors in "
            f"{len(passes)} passes, {pack_ms:.0f} ms CPU"
        )
        plain = Memory(SqliteStore(plain_path), ProjectionEmbedder())
        for m in (memory, plain):  # warm-up writes elsewhere: connections, statements
            m.remember("a warm-up write", scope=("other",))
        remember: dict[str, list[float]] = {"packed": [], "plain": []}
        forget: dict[str, list[float]] = {"packed": [], "plain": []}
        with contextlib.closing(sqlite3.connect(packed_path)) as conn:  # old ids, 700 apart
            ids = [row[0] for row in conn.execute("SELECT id FROM items ORDER BY id")]
        old = ids[: args.writes * 700 : 700]
        with unpacked():  # the same writes in both files: neither packs here
            for i in range(args.writes):
                for name, m in (("packed", memory), ("plain", plain)):
                    text = f"a new memory {i} about lisbon"
                    remember[name].append(cpu_ms(lambda m=m, t=text: m.remember(t, scope=SCOPE)))
            for item in old:
                for name, m in (("packed", memory), ("plain", plain)):
                    forget[name].append(cpu_ms(lambda m=m, i=item: m.forget(i)))
        with contextlib.closing(sqlite3.connect(packed_path)) as conn:
            segments = conn.execute("SELECT count(*) FROM vector_segments").fetchone()[0]
        for name in ("packed", "plain"):
            print(
                f"{name}: remember {statistics.median(remember[name]):.1f} ms, "
                f"forget {statistics.median(forget[name]):.1f} ms CPU (medians of {args.writes})"
            )
        report: list[MaintenanceReport] = []
        repack_ms = cpu_ms(lambda: report.append(memory.maintain()))
        idle_ms = cpu_ms(lambda: report.append(memory.maintain()))
        print(
            f"repack: {report[0].packed:,} vectors of {len(old)} holes in {repack_ms:.0f} ms "
            f"CPU; a pass with nothing to pack {idle_ms:.0f} ms ({segments} segments before)"
        )
        memory.close()
        plain.close()
    return 0


def _until_packed(memory: Memory) -> Iterator[MaintenanceReport]:
    """``maintain()`` passes until one packs nothing."""
    while True:
        report = memory.maintain()
        yield report
        if not report.packed:
            return


if __name__ == "__main__":
    raise SystemExit(main())
