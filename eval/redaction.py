"""How often ``redact_secrets`` changes ordinary text: its false-positive rate on LoCoMo.

Run from the repository root::

    PYTHONPATH=core:drivers python -m eval.redaction --data PATH/locomo_dev.json [--show]

Every dialogue turn is redacted as ``eval.locomo`` remembers it (``speaker: text`` and
the shared image's caption). LoCoMo's conversations hold no credential, so every turn
redaction changes is a false positive: the run prints how many turns changed among how
many (the rate ``docs/privacy.md`` states), how many placeholders of each kind, and with
``--show`` each changed turn before and after. The dataset is not part of the repository
(CC BY-NC 4.0): pass its path.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from engramdb import redact_secrets

from . import locomo

__all__ = ["main", "turns"]

_PLACEHOLDER = re.compile(r"\[REDACTED:([a-z0-9_]+)\]")


def turns(path: Path) -> list[str]:
    """Every turn of a LoCoMo-format file, as the harness remembers it."""
    return [locomo.memory_text(turn) for talk in locomo.load(path) for turn in talk.turns]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.redaction", description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    parser.add_argument("--show", action="store_true", help="print each changed turn")
    args = parser.parse_args(argv)
    texts = turns(args.data)
    kinds: Counter[str] = Counter()
    changed = 0
    for text in texts:
        redacted = redact_secrets(text)
        if redacted != text:
            changed += 1
            kinds.update(_PLACEHOLDER.findall(redacted))
            if args.show:
                print(f"- {text}\n+ {redacted}")
    rate = changed / len(texts) if texts else 0.0
    print(f"redaction changed {changed} of {len(texts)} turns ({rate:.2%})")
    for kind, count in kinds.most_common():
        print(f"  {kind}: {count}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
