"""The public surface is small, sorted and complete."""

from __future__ import annotations

import engramdb


def test_all_is_sorted_and_every_name_exists() -> None:
    """engramdb.__all__ is sorted and each name resolves."""
    assert engramdb.__all__ == sorted(engramdb.__all__)
    missing = [name for name in engramdb.__all__ if not hasattr(engramdb, name)]
    assert missing == []


def test_every_error_class_is_exported_under_one_root() -> None:
    """Every exception class of the error tree is exported and derives from EngramError."""
    from engramdb import _errors

    errors = {
        name
        for name, value in vars(_errors).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    assert errors <= set(engramdb.__all__)
    assert all(issubclass(getattr(engramdb, name), engramdb.EngramError) for name in errors)
    assert issubclass(engramdb.ValidationError, ValueError)
    assert issubclass(engramdb.NotFoundError, KeyError)
    assert issubclass(engramdb.SchemaTooNewError, engramdb.StoreError)
    assert issubclass(engramdb.ProviderTimeoutError, engramdb.ProviderError)


def test_sync_and_async_faces_offer_the_same_methods() -> None:
    """Memory and AsyncMemory expose the same operation names."""

    def public(cls: type) -> set[str]:
        return {n for n in vars(cls) if not n.startswith("_")}

    assert public(engramdb.Memory) - {"close"} == public(engramdb.AsyncMemory) - {"aclose"}
