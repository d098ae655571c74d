"""Does a native x86-64 binary run on every x86-64 machine of this project's kind?

Some of these machines have AVX-512 and some do not. Code compiled for AVX-512 (e.g. by
``-march=native`` on an AVX-512 machine) dies with SIGILL on the others, so a binary the
tests depend on may use AVX-512 only in functions chosen at run time after asking the
CPU (``cpuid``; GCC's ``target_clones`` resolvers do the same).

:func:`avx512_problems` disassembles a file with ``objdump`` and lists every function that
uses AVX-512 (a ``zmm`` register, an opmask register, an embedded broadcast, a register
above 15, or ``vpternlog``) unless it is a dispatch target: its name says AVX-512
(pgvector's ``...Avx512Popcount``, GCC's ``name.avx512f`` clones) and the file asks the
CPU what it has. Run ``python tests/postgres/portability.py FILE...`` to check files by
hand.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

_FUNCTION = re.compile(r"^[0-9a-f]+ <(?P<name>[^>]+)>:$")
_AVX512 = re.compile(
    r"%zmm\d|%k[0-7]\b|\{1to\d+\}|%[xy]mm(?:1[6-9]|2\d|3[01])\b|\bvpternlog",
)
_DISPATCH_TARGET = re.compile(r"avx512", re.IGNORECASE)
_ASKS_CPU = re.compile(r"\tcpuid\b|\.resolver>|__cpu_indicator_init|__cpu_model")


def avx512_problems(path: Path) -> list[str]:
    """One line for each function of ``path`` that would crash on an x86-64 CPU without
    AVX-512 (empty: the file runs on every x86-64-v3 machine, as far as AVX-512 goes)."""
    listing = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    function = "?"
    for line in listing.splitlines():
        header = _FUNCTION.match(line)
        if header:
            function = header["name"]
        elif _AVX512.search(line):
            counts[function] += 1
            first.setdefault(function, line.split("\t", 1)[-1].strip())
    dispatches = bool(_ASKS_CPU.search(listing))
    return [
        f"{path.name}: {name} has {count} AVX-512 instruction(s), e.g. `{first[name]}`"
        + ("" if dispatches else " (and the file never asks the CPU: no run-time dispatch)")
        for name, count in sorted(counts.items())
        if not (dispatches and _DISPATCH_TARGET.search(name))
    ]


if __name__ == "__main__":
    problems = [line for name in sys.argv[1:] for line in avx512_problems(Path(name))]
    print("\n".join(problems) or "portable: no AVX-512 outside run-time dispatch")
    sys.exit(1 if problems else 0)
