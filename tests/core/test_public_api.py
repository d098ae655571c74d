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
    from engramdb._base import errors as _errors

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


def test_sync_and_async_faces_offer_the_same_methods_with_the_same_signatures() -> None:
    """Memory and AsyncMemory expose the same operations with identical parameters
    (names, kinds, defaults, annotations) and return annotations; only AsyncMemory's are
    coroutines."""
    import inspect

    def public(cls: type) -> dict[str, object]:
        return {n: v for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}

    for sync_class, async_class in [
        (engramdb.Memory, engramdb.AsyncMemory),
        (engramdb.BoundMemory, engramdb.AsyncBoundMemory),
    ]:
        sync = public(sync_class)
        async_ = public(async_class)
        assert set(sync) - {"close"} == set(async_) - {"aclose"}
        for name in set(sync) - {"close", "bind"}:
            assert inspect.signature(sync[name]) == inspect.signature(async_[name]), name
            assert not inspect.iscoroutinefunction(sync[name]), name
            assert inspect.iscoroutinefunction(async_[name]), name
    # bind() is immediate in both faces and returns the view of its face.
    binds = [inspect.signature(cls.bind) for cls in (engramdb.Memory, engramdb.AsyncMemory)]
    assert [sig.return_annotation for sig in binds] == ["BoundMemory", "AsyncBoundMemory"]
    assert binds[0].parameters == binds[1].parameters
    assert inspect.signature(engramdb.Memory.__init__) == inspect.signature(
        engramdb.AsyncMemory.__init__
    )


def test_the_store_protocol_module_exports_every_op_and_result() -> None:
    """engramdb.store is the public protocol: every op of the Op union, every result type
    and the store types are exported from it (ruff keeps __all__ sorted)."""
    import typing

    from engramdb import store

    assert all(hasattr(store, name) for name in store.__all__)
    ops = {op.__name__ for op in typing.get_args(store.Op)}
    results = {
        "ScopeCount", "SearchHit", "SearchResult", "StoreStats", "StoredItem", "VectorRepair",
    }  # fmt: skip
    kinds = {"AsyncStore", "SyncStore", "StoreCapabilities", "ScopeSet", "KEEP"}
    assert ops | results | kinds <= set(store.__all__)


def test_a_moved_public_module_keeps_its_old_import_path() -> None:
    """``engramdb.context``, ``engramdb.semantics`` and ``engramdb.store_rows`` moved into
    packages; their old paths import the new module itself (one object, one state), as an
    ``import`` statement and as ``from engramdb import ...``."""
    import importlib

    from engramdb import _MOVED

    assert set(_MOVED) == {"engramdb.context", "engramdb.semantics", "engramdb.store_rows"}
    for old, new in _MOVED.items():
        assert importlib.import_module(old) is importlib.import_module(new)
        assert importlib.import_module(new).__name__ == new
    from engramdb import semantics, store_rows
    from engramdb.store import rows
    from engramdb.store import semantics as moved

    assert semantics is moved and store_rows is rows
