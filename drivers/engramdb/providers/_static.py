"""The static (token-table) embedder on CPython: the table shipped in the package, or one
from a file.

``embedder_from_url("static:")`` (also ``static:default``) is the table shipped in the
wheel (``engramdb/data/static-minilm-256.bin``, distilled from all-MiniLM-L6-v2 by
``eval/distill_static.py``); ``static:/path/to/table.bin`` reads another table in the
same format, and ``static:/path/to/model2vec-folder`` a published model2vec model
(``engramdb.providers._model2vec``). The core's :class:`~engramdb.StaticEmbedder` never
opens a file: this module reads the bytes and hands them over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import engramdb
from engramdb._errors import ConfigurationError
from engramdb._static_embedder import StaticEmbedder

__all__ = ["DEFAULT_TABLE", "SHIPPED_NAME", "shipped_table", "static_embedder"]

DEFAULT_TABLE = "static-minilm-256.bin"
SHIPPED_NAME = "minilm-l6-256"


def shipped_table() -> bytes:
    """The bytes of the table that ships with engramdb (``engramdb/data/``; in a checkout
    ``engramdb.__path__`` spans ``core/`` and ``drivers/``, in a wheel one folder)."""
    for folder in engramdb.__path__:
        path = Path(folder) / "data" / DEFAULT_TABLE
        if path.is_file():
            return path.read_bytes()
    raise ConfigurationError(
        f"the static table engramdb/data/{DEFAULT_TABLE} is missing from this install; "
        "reinstall engramdb, or give --embedder another model"
    )


def static_embedder(path: str | None = None, **options: Any) -> StaticEmbedder:
    """The embedder of the shipped table (``path`` None or ``"default"``), else of the
    table file at ``path``, or of the model2vec model in the folder ``path`` (the space
    is named after the file or folder)."""
    if path is None or path in ("", "default", SHIPPED_NAME):
        return StaticEmbedder.from_bytes(shipped_table(), name=SHIPPED_NAME, **options)
    file = Path(path).expanduser()
    if file.is_dir():  # a published model2vec model
        from ._model2vec import model2vec_table

        return StaticEmbedder.from_bytes(model2vec_table(file), name=file.name, **options)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the static table {str(file)!r} ({exc.strerror or exc}); give the "
            "path of a table made by eval/distill_static.py, or 'static:' for the shipped one"
        ) from None
    return StaticEmbedder.from_bytes(data, name=file.stem, **options)
