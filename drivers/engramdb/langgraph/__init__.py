"""``engramdb.langgraph``: LangGraph's ``BaseStore`` over engramdb (extra ``langgraph``).

See ``docs/langgraph.md``.
"""

try:
    import langgraph.store.base  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "engramdb.langgraph needs LangGraph: pip install 'engramdb[langgraph]'"
    ) from exc

from ._store import EngramStore

__all__ = ["EngramStore"]
