"""A recall's search: its arguments checked, both legs in one store batch, the ranking.

:func:`search` checks a recall's arguments (before any effect) and returns a
:class:`Search`; its :meth:`~Search.run` flow embeds the query, searches both legs in one
store batch and ranks them (``engramdb.ranking``), and :meth:`~Search.hits` makes the result.
``Memory.recall`` returns the first ``top_k``; a bound view re-ranks all candidates under
its policy first (``_bound_flows``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from engramdb._base.clock import to_ms
from engramdb._base.errors import ConfigurationError, ProviderError, ValidationError, shown
from engramdb._base.types import Hit, Hits, RecallMode, RecallStatus
from engramdb._vectors.codec import decode_f32
from engramdb.flows._effects import Flow, Store
from engramdb.flows.context import FlowContext, checked_space, embed, embeds, supplied_vector
from engramdb.ranking._fusion import rrf
from engramdb.ranking._hits import FUSIONS, MIN_SIMILARITY, Ranking, default_weights, rank
from engramdb.store import Op, ScopeSet, SearchLexical, SearchResult, SearchVectors
from engramdb.store._filter import Filter
from engramdb.store._ids import new_id
from engramdb.validate import check_float, check_int

__all__ = ["READ_ONLY", "Found", "Search", "search"]

_MODES = ("hybrid", "vector", "lexical")

READ_ONLY = (
    "read-only: the store is open read-only, so this recall wrote no receipt "
    "(selection_id is None) and complete() cannot score it"
)
"""``Hits.error`` of a recall on a read-only store (``capabilities.read_only``), after
the search's own error if it has one (``"ProviderTimeoutError; read-only: ..."``)."""


def search(
    ctx: FlowContext,
    query: object,
    selection: ScopeSet,
    *,
    top_k: object = 10,
    mode: object = "hybrid",
    min_similarity: object = None,
    filter: object = None,
    fusion: object = "convex",
    rrf_k: object = 60,
    weights: object = None,
    exact: object = False,
    candidates: bool = False,
    vector: object = None,
) -> Search:
    """A recall's search of ``selection`` in ``ctx``, its arguments checked now (before
    any effect); ``candidates``: rank every candidate with evidence, not only ``top_k``.
    ``vector``: the caller's own query vector (:func:`supplied_vector`), searched instead
    of the query's embedding; the query's text still drives the lexical leg. Without
    one, a memory that has no embedder searches the lexical leg alone."""
    text = ctx.query_text(query)
    if mode not in _MODES:
        raise ValidationError(f"mode={mode!r} is not supported; use one of {list(_MODES)}")
    own = None if vector is None else supplied_vector(ctx, vector)
    if own is not None and mode == "lexical":
        raise ValidationError(
            "vector= is searched by the vector leg, which mode='lexical' skips; "
            "use mode='hybrid' or 'vector', or leave vector out"
        )
    if own is None and mode == "vector" and not embeds(ctx):
        raise ValidationError(
            f"mode='vector' needs a query vector: this memory has no embedder (space "
            f"{ctx.embedder.space.id}); pass vector=[...] or use mode='hybrid'"
        )
    if fusion not in FUSIONS:
        raise ValidationError(
            f"fusion={shown(fusion)} is not supported; use one of {list(FUSIONS)}"
        )
    semantic = getattr(ctx.embedder, "semantic", True) is not False
    ranking = Ranking(
        mode=mode,  # type: ignore[arg-type]
        top_k=check_int("top_k", top_k, 1, ctx.check.limits.max_top_k),
        weights={**default_weights(fusion, semantic), **_weights(weights)},
        fusion=fusion,
        rrf_k=check_int("rrf_k", rrf_k, 1, 10_000),
        min_similarity=(
            MIN_SIMILARITY
            if min_similarity is None
            else check_float("min_similarity", min_similarity, -1.0, 1.0)
        ),
        shards=ctx.shards,
    )
    if ranking.mode == "lexical" and not ctx.capabilities.supports_lexical:
        raise ConfigurationError(
            "this store has no lexical search (supports_lexical is False); "
            "use mode='vector' or 'hybrid'"
        )
    return Search(
        ctx,
        text,
        selection,
        ranking,
        ctx.check.filter(filter),
        ctx.check.flag("exact", exact),
        candidates,
        own,
    )


@dataclass(frozen=True, slots=True)
class Search:
    """A checked recall: :meth:`run` searches both legs in one store batch and ranks them."""

    context: FlowContext
    text: str
    selection: ScopeSet
    ranking: Ranking
    filter: Filter | None
    exact: bool
    candidates: bool
    vector: bytes | None = None  # the caller's own query vector (unit float32 bytes)

    def run(self) -> Flow[Found]:
        ctx, ranking, text = self.context, self.ranking, self.text
        lexical = ctx.capabilities.supports_lexical
        now = ctx.now()
        # Fusion scores each leg's best ``depth``; a recall in one mode ranks its leg's
        # hits in the leg's own order (above the floor, equal ones newest first), so its
        # first top_k are all it needs (unless every candidate is to be ranked).
        one_leg = ranking.mode != "hybrid" and not self.candidates
        leg_k = ranking.top_k if one_leg else ranking.depth
        status: RecallStatus = "used"
        error: str | None = None
        coverage: float | None = None

        space_id: str | None = None  # of the query vector, once it is embedded
        query_vector: tuple[float, ...] | None = None
        if self.vector is not None:
            space_id = ctx.embedder.space.id
            query_vector = tuple(decode_f32(self.vector))
        elif ranking.mode != "lexical" and embeds(ctx):
            try:
                (blob,) = yield from embed(ctx, [text], "query")
                space_id = (yield from checked_space(ctx, now)).id
                query_vector = tuple(decode_f32(blob))
            except ProviderError as exc:
                if ctx.on_embed_error == "raise" or not lexical:
                    raise
                error = type(exc).__name__

        ops: list[Op] = []
        if query_vector is not None and space_id is not None:
            ops.append(
                SearchVectors(
                    self.selection, space_id, query_vector, leg_k, now, self.exact, self.filter
                )
            )
        if lexical and (ranking.mode != "vector" or query_vector is None):
            ops.append(SearchLexical(self.selection, text, leg_k, now, self.filter, space_id))
        results = yield Store(tuple(ops))
        vector: SearchResult | None = results[0] if query_vector is not None else None
        lexical_result: SearchResult | None = (
            results[-1] if ops and isinstance(ops[-1], SearchLexical) else None
        )
        partial = False
        if vector is not None and vector.coverage is not None:
            embedded, items = vector.coverage
            coverage = embedded / items if items else 1.0
            partial = embedded < items
        if any(leg is not None and leg.skipped for leg in (vector, lexical_result)):
            status, error = "degraded", error or "CorruptDataError"  # some could not count
        elif query_vector is None:
            status = "degraded" if error else "lexical_only"
        elif partial:
            status = "partial"
        ranks = replace(ranking, top_k=leg_k) if self.candidates else ranking
        ranked = rank(ranks, vector, lexical_result, space_id, text)
        scorable = not ctx.capabilities.read_only
        if not scorable:
            error = READ_ONLY if error is None else f"{error}; {READ_ONLY}"
        return Found(ranking.mode, now, status, error, coverage, tuple(ranked), scorable)


@dataclass(frozen=True, slots=True)
class Found:
    """What a :class:`Search` found: the ranked hits (every candidate's with
    ``candidates``), when (``now``), how well (``status``, ``error``, ``coverage``), and
    whether a receipt may be written to score it later (``scorable``: False on a
    read-only store, whose recall writes nothing)."""

    mode: RecallMode
    now: datetime
    status: RecallStatus
    error: str | None
    coverage: float | None
    ranked: tuple[Hit, ...]
    scorable: bool = True

    def hits(self, ranked: Sequence[Hit], selection_id: str | None = None) -> Hits:
        """A recall's answer: ``ranked`` (these hits, or a re-ranking of them) with this
        search's status; ``selection_id`` names the selection (a new id when None), and
        is None when the recall is not ``scorable``."""
        if not self.scorable:
            selection_id = None
        elif selection_id is None:
            selection_id = new_id(to_ms(self.now))
        return Hits(
            ranked,
            status=self.status,
            selection_id=selection_id,
            mode=self.mode,
            error=self.error,
            coverage=self.coverage,
        )


def _weights(value: object) -> dict[str, float]:
    """The leg weights given to recall (each replaces the default of its leg)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(
            f"weights={shown(value)} must be a dict like {{'vector': 0.4, 'lexical': 0.6}}"
        )
    rrf({"vector": (), "lexical": ()}, weights=value)  # validates now, before any effect
    return dict(value)
