"""The error tree of engramdb.

Every exception engramdb raises on purpose derives from one root::

    EngramError
    ├── ConfigurationError (ValueError)   a setting or a string form is wrong
    ├── ValidationError (ValueError)      an argument is wrong; nothing was changed
    │   └── DimensionMismatchError        a vector has the wrong number of dimensions
    ├── NotFoundError (KeyError)          no memory with that id
    ├── ConflictError                     a compare-and-set lost: the revision moved on
    ├── StoreError                        the store failed or is closed
    │   ├── MigrationError                a schema migration failed and was rolled back
    │   ├── SchemaTooNewError             the database was written by a newer engramdb
    │   └── CorruptDataError              stored bytes do not decode (a row never scores)
    └── ProviderError                     an embedding provider failed
        ├── ProviderHTTPError             the provider answered with an HTTP error
        ├── ProviderTimeoutError          the provider did not answer in time
        └── IngestError                   remember_many stopped; earlier batches are kept

Driver exceptions (``sqlite3.Error``, ``httpx.HTTPError`` ...) are translated at the
boundary with ``raise ... from exc``. Messages are one sentence: what was wrong, with the
value, and what to do. Messages never contain credentials.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = [
    "ConfigurationError",
    "ConflictError",
    "CorruptDataError",
    "DimensionMismatchError",
    "EngramError",
    "IngestError",
    "MigrationError",
    "NotFoundError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderTimeoutError",
    "SchemaTooNewError",
    "StoreError",
    "ValidationError",
]


class _Shown(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        # repr() of an int past 4,300 digits raises ValueError; its length is what matters
        if x.bit_length() > 1024:  # over 308 digits
            digits = int(x.bit_length() * 0.30103) + 1
            return f"<an integer of about {digits:,} digits>"
        return super().repr_int(x, level)


_SHOWN = _Shown()
_SHOWN.maxstring = _SHOWN.maxother = 80
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 8
_SHOWN.maxlevel = 4


def shown(value: object) -> str:
    """``repr(value)`` as an error message shows it: cut to about 80 characters per
    string and 8 entries per container, so that a huge argument gives a short message."""
    return _SHOWN.repr(value)


class EngramError(Exception):
    """Root of every error engramdb raises on purpose."""


class ConfigurationError(EngramError, ValueError):
    """A setting, an option or an embedder string is wrong; fix the configuration."""


class ValidationError(EngramError, ValueError):
    """An argument is invalid. The call changed nothing."""


class DimensionMismatchError(ValidationError):
    """A vector does not have the dimensions its embedding space declares."""

    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class NotFoundError(EngramError, KeyError):
    """No memory has the given id (or it has expired)."""

    def __str__(self) -> str:  # KeyError would repr() the message; keep it readable
        return str(self.args[0]) if self.args else ""


class ConflictError(EngramError):
    """A write with ``expected_revision`` found another revision; it changed nothing.

    ``expected`` is the revision the caller named and ``actual`` the one stored (0 when
    the memory does not exist), when the store could tell them; read the memory again
    and retry.
    """

    def __init__(
        self, message: str, *, expected: int | None = None, actual: int | None = None
    ) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class StoreError(EngramError):
    """The store failed, is closed, or holds data this code cannot use."""


class MigrationError(StoreError):
    """A schema migration step failed; that step was rolled back."""


class SchemaTooNewError(StoreError):
    """The database has a newer schema than this engramdb knows; it was left untouched."""

    def __init__(self, message: str, *, found: int, supported: int) -> None:
        super().__init__(message)
        self.found = found
        self.supported = supported


class CorruptDataError(StoreError):
    """Stored bytes do not decode as what they claim to be."""


class ProviderError(EngramError):
    """An embedding provider failed or answered with something unusable."""

    def __init__(self, message: str, *, provider: str = "") -> None:
        super().__init__(message)
        self.provider = provider


class IngestError(ProviderError):
    """``remember_many`` stopped at a provider failure after committing some batches.

    ``committed`` holds the records stored (each batch was atomic), ``index`` the
    position of the first item that was not stored; the provider's error is the
    ``__cause__``. Run the same import again: identical texts are not stored twice.
    """

    def __init__(
        self, message: str, *, committed: list[Any], index: int, provider: str = ""
    ) -> None:
        super().__init__(message, provider=provider)
        self.committed = committed
        self.index = index


class ProviderHTTPError(ProviderError):
    """The provider answered with an HTTP error status."""

    def __init__(
        self, message: str, *, provider: str = "", status: int = 0, body: str = ""
    ) -> None:
        super().__init__(message, provider=provider)
        self.status = status
        self.body = body


class ProviderTimeoutError(ProviderError):
    """The provider did not answer within the timeout (after retries)."""
