"""Memory operations as generator flows, for hosts that drive them themselves.

``Memory`` and ``AsyncMemory`` drive the flows for you; an adapter that batches
operations its own way (the LangGraph store, ``engramdb.langgraph``) drives them with
:func:`drive` (plain calls) or :func:`adrive` (awaits). A flow (:data:`Flow`) yields
effects and receives their results: :class:`Embed` (the embedder's vectors),
:class:`Rerank` (the reranker's scores, one per text; only a recall with a rerank
stage yields it), :class:`Store` (a store batch's results) and :class:`Sleep`.
:class:`MemoryFlows` builds the flows of the memory operations.

Public for adapters, but not part of the store-author kit: the flows' signatures follow
the memory operations and may change between minor versions (``docs/stores.md``,
"The driver kit"). Standard library only.
"""

from engramdb.flows._effects import Effect, Embed, Flow, Rerank, Sleep, Store, adrive, drive
from engramdb.flows._operations import MemoryFlows

__all__ = [
    "Effect",
    "Embed",
    "Flow",
    "MemoryFlows",
    "Rerank",
    "Sleep",
    "Store",
    "adrive",
    "drive",
]
