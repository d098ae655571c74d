"""``engramdb import FOLDER``: what a re-import and a large document cost.

Run from the repository root::

    PYTHONPATH=core:drivers python -m bench.folder_import --reimport 50,400 --runs 5
    PYTHONPATH=core:drivers python -m bench.folder_import --document-mb 50

``--reimport``: a folder of N Markdown files (five sections each, about 600 characters
of text a file, so five chunks at ``--max-chars 120``) is imported into a fresh SQLite
file, then imported again ``--runs`` times unchanged; each rerun is timed in process
(``engramdb.cli.main``, output discarded) and the median is printed per N, with the
ratio of the largest N to the smallest per file: 1.0 is linear.

``--document-mb``: one Markdown file of that many megabytes (paragraphs of about 120
ASCII characters, each its own: :func:`paragraph`) imported by ``engramdb import`` in a
child process, whose peak resident memory (``ru_maxrss`` from ``os.wait4``) is printed
next to that of the same command on a one-paragraph folder, and the difference as a
multiple of the file's size, with the processor time the import took (user and
system: a noisy machine's load does not count).

Both use ``ENGRAMDB_EMBEDDER=hash:64`` (no model, no network) and the CLI's defaults
otherwise (redaction on).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ["amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heath", "inlet", "juniper"]


def paragraph(number: int) -> str:
    """The paragraph ``number``: its own six words (of ten, by the digits of
    ``number``, so every paragraph below a million is its own text and the words stay
    few), then a fixed sentence."""
    own = " ".join(WORDS[number // 10**place % 10] for place in range(6))
    return (
        f"{own}: the hotel is near the harbour and breakfast is included. Check-in opens at 3.\n\n"
    )


def write_folder(folder: Path, files: int) -> None:
    folder.mkdir(parents=True)
    for i in range(files):
        parts = [f"# Note {i}"]
        parts += [
            f"## Part {j}\n\nNote {i}, part {j}: the boat leaves at {j} pm." for j in range(5)
        ]
        (folder / f"note-{i:05d}.md").write_text("\n\n".join(parts) + "\n", encoding="utf-8")


def reimport(sizes: list[int], runs: int) -> None:
    from engramdb.cli import main

    os.environ["ENGRAMDB_EMBEDDER"] = "hash:64"
    medians: dict[int, float] = {}
    for files in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "notes"
            write_folder(folder, files)
            argv = [
                "--db",
                str(Path(tmp) / "bench.db"),
                "import",
                str(folder),
                "--max-chars",
                "120",
            ]
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                assert main(argv) == 0
                times = []
                for _ in range(runs):
                    started = time.perf_counter()
                    assert main(argv) == 0
                    times.append(time.perf_counter() - started)
        medians[files] = statistics.median(times)
        runs_ms = ", ".join(f"{t * 1000:.0f}" for t in times)
        print(
            f"{files:5d} files: re-import median {medians[files] * 1000:7.1f} ms "
            f"({medians[files] / files * 1e6:6.0f} us a file; runs {runs_ms} ms)"
        )
    low, high = min(medians), max(medians)
    ratio = (medians[high] / high) / (medians[low] / low)
    print(f"time a file at {high} files / at {low} files: {ratio:.2f}")


def peak_rss(folder: Path, db: Path) -> tuple[int, float]:
    """The peak resident memory, in bytes, of ``engramdb import folder`` in a child,
    and the processor time it took (user and system, seconds)."""
    code = "import sys; from engramdb.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "ENGRAMDB_EMBEDDER": "hash:64"}
    argv = [sys.executable, "-c", code, "--db", str(db), "import", str(folder)]
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0, child.returncode
    return int(usage.ru_maxrss) * 1024, usage.ru_utime + usage.ru_stime  # KiB on Linux


def document_memory(megabytes: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        empty, folder = Path(tmp) / "empty", Path(tmp) / "big"
        empty.mkdir()
        folder.mkdir()
        (empty / "one.md").write_text(paragraph(0), encoding="utf-8")
        size = paragraphs = 0
        with (folder / "big.md").open("w", encoding="utf-8") as out:
            while size < megabytes * 1_000_000:
                size += out.write(paragraph(paragraphs))  # ASCII: characters are bytes
                paragraphs += 1
        idle, _ = peak_rss(empty, Path(tmp) / "idle.db")
        peak, took = peak_rss(folder, Path(tmp) / "big.db")
        shutil.rmtree(folder)
    own = peak - idle
    print(
        f"a {size / 1e6:.1f} MB document ({paragraphs} paragraphs): peak RSS "
        f"{peak / 1e6:.0f} MB, a one-paragraph folder {idle / 1e6:.0f} MB; the document's "
        f"own cost {own / 1e6:.0f} MB = {own / size:.1f}x its size, {peak / size:.1f}x "
        f"counting everything ({took:.0f} s of processor time)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reimport", metavar="N,N", help="folder sizes, e.g. 50,400")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--document-mb", type=float, metavar="MB")
    args = parser.parse_args()
    if args.reimport:
        reimport([int(n) for n in args.reimport.split(",")], args.runs)
    if args.document_mb:
        document_memory(args.document_mb)


if __name__ == "__main__":
    main()
