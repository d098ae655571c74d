"""The CI smoke check of the evaluation (``tox -e eval``): the harness end to end with the
hash embedder and the static table that ships with engramdb, and floors on what it
measures: on LoCoMo, and on the name-sharing probes (``eval.probe``) that ship here.

It runs on LoCoMo's development split when the file is there (``ENGRAMDB_LOCOMO``, or
``../shared/data/locomo/locomo_dev.json`` beside the repository) and checks the floors of
``eval/floors.json`` for it; otherwise it says so and runs on ``eval.synthetic``'s
made-up conversations with their own floors, so the harness is still exercised. With
``--minilm`` it also runs all-MiniLM-L6-v2 (the ``local`` extra) against its floors.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from . import locomo, probe
from .synthetic import conversations

ROOT = Path(__file__).resolve().parent.parent
FLOORS = Path(__file__).with_name("floors.json")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    floors = json.loads(FLOORS.read_text(encoding="utf-8"))
    dev = Path(
        os.environ.get("ENGRAMDB_LOCOMO", ROOT.parent / "shared/data/locomo/locomo_dev.json")
    )
    with tempfile.TemporaryDirectory() as scratch:
        runs = []
        if dev.is_file():
            runs.append((dev, "hash:256", floors["locomo_dev hash:256"]))
            runs.append((dev, "static", floors["locomo_dev static"]))
            if "--minilm" in args:
                runs.append((dev, "minilm", floors["locomo_dev minilm"]))
        else:
            print(f"NOTE: no LoCoMo development split at {dev} (set ENGRAMDB_LOCOMO); "
                  "the smoke check runs on made-up conversations instead")  # fmt: skip
            data = Path(scratch) / "synthetic.json"
            data.write_text(json.dumps(conversations()), encoding="utf-8")
            runs.append((data, "hash:256", floors["synthetic hash:256"]))
        failed = 0
        for number, (data, embedder, minimums) in enumerate(runs):
            floor_file = Path(scratch) / f"floors-{number}.json"
            floor_file.write_text(json.dumps(minimums), encoding="utf-8")
            failed |= locomo.main(
                ["--data", str(data), "--embedder", embedder, "--floors", str(floor_file)]
            )
        # The name-sharing probes ship with engramdb: they always run.
        for embedder in ("static", "minilm") if "--minilm" in args else ("static",):
            for name in ("people", "projects"):
                floor_file = Path(scratch) / f"probe-{name}-{embedder}.json"
                floor_file.write_text(
                    json.dumps(floors[f"probe {name} {embedder}"]), encoding="utf-8"
                )
                failed |= probe.main(
                    ["--probe", name, "--embedder", embedder, "--floors", str(floor_file)]
                )
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
