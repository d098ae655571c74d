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
from engramdb import ConfigurationError, StaticEmbedder

__all__ = ["shipped_table", "static_embedder"]


def shipped_table() -> bytes:
    """The bytes of the table that ships with engramdb (``StaticEmbedder.SHIPPED_FILE``)."""
    path = Path(engramdb.__file__).parent / StaticEmbedder.SHIPPED_FILE
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(
            f"the static table engramdb/{StaticEmbedder.SHIPPED_FILE} cannot be read "
            f"({exc.strerror or exc}); reinstall engramdb, or give --embedder another model"
        ) from None


def static_embedder(path: str | None = None, **options: Any) -> StaticEmbedder:
    """The embedder of the shipped table (``path`` None or ``"default"``), else of the
    table file at ``path``, or of the model2vec model in the folder ``path`` (the space
    is named after the file or folder)."""
    shipped = StaticEmbedder.SHIPPED_NAME
    if path is None or path in ("", "default", shipped):
        return StaticEmbedder.from_bytes(shipped_table(), name=shipped, **options)
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
