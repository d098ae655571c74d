"""Check an embedder string end to end: ``python -m engramdb.providers.probe [URL]``.

Embeds one fixed phrase (as a query) and prints only the provider/model, the
dimensions, whether every value is finite and the vector's norm. ``URL`` defaults to
``$ENGRAMDB_EMBEDDER``. Exit status 0 on success, 1 on a provider or configuration
error (printed as its class and message, which never hold credentials), 2 on bad usage.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

from engramdb import EngramError

from ._url import embedder_from_url

__all__ = ["PHRASE", "main"]

PHRASE = "engramdb probe: the quick brown fox remembers the lazy dog"


def main(argv: Sequence[str] | None = None, **overrides: Any) -> int:
    """Run the probe; ``overrides`` go to the embedder (tests pass a transport)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1 or (args and args[0] in ("-h", "--help")):
        print("usage: python -m engramdb.providers.probe [EMBEDDER_URL]", file=sys.stderr)
        return 2
    try:
        embedder = embedder_from_url(args[0] if args else None, **overrides)
    except EngramError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    try:
        [vector] = embedder.embed([PHRASE], "query")
        space = embedder.space
    except EngramError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        close = getattr(embedder, "close", None)
        if callable(close):
            close()
    finite = all(math.isfinite(value) for value in vector)
    norm = math.sqrt(math.fsum(value * value for value in vector)) if finite else math.nan
    print(f"provider/model: {space.provider}/{space.model}")
    print(f"dimensions: {len(vector)}")
    print(f"finite: {'yes' if finite else 'no'}")
    print(f"norm: {norm:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
