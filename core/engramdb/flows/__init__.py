"""Memory operations as generator flows, for hosts that drive them themselves.

``Memory`` and ``AsyncMemory`` drive the flows for you; an adapter that batches
operations its own way (the LangGraph store, ``engramdb.langgraph``) drives them with
:func:`drive` (plain calls) or :func:`adrive` (awaits). A flow (:data:`Flow`) yields
effects and receives their results: :class:`Embed` (the embedder's vectors),
:class:`Rerank` (the reranker's scores, one per text; only a recall with a rerank
stage yields it), :class:`Store` (a store batch's results) and :class:`Sleep`.
:class:`MemoryFlows` builds the flows of the memory operations.

:data:`VIEW_OPS` declares each operation of a bound view once: its JSON parameters
(:class:`Field`), its HTTP route (:class:`Route`), its agent tool (:class:`Tool`) and
its CLI command; the HTTP API, the agent tools (and MCP), the client and the CLI are
derived from it (:class:`ViewOp`). ``UNSET`` is ``update``'s "leave it as it is".

Public for adapters, but not part of the store-author kit: the flows' signatures follow
the memory operations and may change between minor versions (``docs/stores.md``,
"The driver kit"). Standard library only.
"""

from engramdb.flows._effects import Effect, Embed, Flow, Rerank, Sleep, Store, adrive, drive
from engramdb.flows._operations import UNSET, MemoryFlows
from engramdb.flows._view_ops import VIEW_OPS, Field, Route, Tool, ViewOp

__all__ = [
    "UNSET",
    "VIEW_OPS",
    "Effect",
    "Embed",
    "Field",
    "Flow",
    "MemoryFlows",
    "Rerank",
    "Route",
    "Sleep",
    "Store",
    "Tool",
    "ViewOp",
    "adrive",
    "drive",
]
