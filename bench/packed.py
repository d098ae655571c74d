"""What packed vector segments cost the writes: packing, a remember, a forget, a repack.

Run from the repository root::

    PYTHONPATH=core:drivers python -m bench.packed            # 100k memories, d=384
    PYTHONPATH=core:drivers python -m bench.packed --n 20000

Builds one scope of ``--n`` memories with ``bench.memory``'s ``ProjectionEmbedder``
(d=384) in a temporary SQLite file, then reports the CPU time of: the ``maintain()``
pass that packs it; ``--writes`` single remembers into the packed scope (new ids, past
every segment's range), each in its own batch, and as many into an unpacked copy of
the same file (the baseline, interleaved); as many forgets of old memories (each deletes
the ~1 MB segment that held it, zeroed by ``secure_delete``); a ``maintain()`` pass that
re-packs those holes against one with nothing to pack. Medians; the machine is shared,
so compare within a run.
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
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.memory import SCOPE, ProjectionEmbedder, corpus
from engramdb import MaintenanceReport, Memory
from engramdb.sqlite import SqliteStore


def cpu_ms(action: Callable[[], object]) -> float:
    started = time.process_time()
    action()
    return 1000 * (time.process_time() - started)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.packed", description=__doc__)
    parser.add_argument("--n", type=int, default=100_000, help="memories in the scope")
    parser.add_argument("--writes", type=int, default=9, help="remembers and forgets each")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        packed_path, plain_path = Path(tmp, "packed.db"), Path(tmp, "plain.db")
        memory = Memory(SqliteStore(packed_path), ProjectionEmbedder())
        texts = corpus(args.n)
        for start in range(0, len(texts), 5000):
            memory.remember_many({"text": t, "scope": SCOPE} for t in texts[start : start + 5000])
        memory.close()
        shutil.copyfile(packed_path, plain_path)
        memory = Memory(SqliteStore(packed_path), ProjectionEmbedder())
        report: list[MaintenanceReport] = []
        pack_ms = cpu_ms(lambda: report.append(memory.maintain()))
        print(f"# n={args.n:,}, d=384, Python {sys.version.split()[0]}")
        print(f"pack: {report[0].packed:,} vectors in a maintain() pass of {pack_ms:.0f} ms CPU")
        plain = Memory(SqliteStore(plain_path), ProjectionEmbedder())
        for m in (memory, plain):  # warm-up writes elsewhere: connections, statements
            m.remember("a warm-up write", scope=("other",))
        remember: dict[str, list[float]] = {"packed": [], "plain": []}
        for i in range(args.writes):
            for name, m in (("packed", memory), ("plain", plain)):
                text = f"a new memory {i} about lisbon"
                remember[name].append(cpu_ms(lambda m=m, t=text: m.remember(t, scope=SCOPE)))
        with contextlib.closing(sqlite3.connect(packed_path)) as conn:  # old ids, 700 apart
            ids = [row[0] for row in conn.execute("SELECT id FROM items ORDER BY id")]
        old = ids[: args.writes * 700 : 700]
        forget: dict[str, list[float]] = {"packed": [], "plain": []}
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
        repack_ms = cpu_ms(lambda: report.append(memory.maintain()))
        idle_ms = cpu_ms(lambda: report.append(memory.maintain()))
        print(
            f"repack: {report[1].packed:,} vectors of {len(old)} holes in {repack_ms:.0f} ms "
            f"CPU; a pass with nothing to pack {idle_ms:.0f} ms ({segments} segments before)"
        )
        memory.close()
        plain.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
