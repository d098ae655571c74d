"""The context every flow runs in, and the embedding steps flows share.

A :class:`FlowContext` is frozen: the embedder, the clock, the argument checks, the
store's capabilities, ``redact`` and the write settings of one ``Memory``. Its methods
check a write's arguments (reading the clock, redacting once); the functions below are
the embedding steps of a flow: :func:`embed` texts in batches, :func:`vector_ops` for
the texts a batch stores, :func:`with_vectors` to store writes with the vectors they
lack. ``MemoryFlows`` (the operations), ``search``, the maintenance flows, bound views
and the LangGraph adapter all take a context; none reaches into another's internals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from engramdb._base.clock import Clock, from_ms, to_ms
from engramdb._base.errors import (
    ConfigurationError,
    CorruptDataError,
    ProviderError,
    ValidationError,
    shown,
)
from engramdb._base.types import (
    EmbeddingSpace,
    EmbedKind,
    MemoryRecord,
    Scope,
    content_sha256,
    is_finite_number,
    validate_scope,
)
from engramdb._embedders.embedder import Embedder
from engramdb._vectors.codec import decode_f32
from engramdb._vectors.index import unit_f32
from engramdb.flows._effects import Embed, Flow, Store
from engramdb.ranking._rerank_guard import RerankGuard
from engramdb.ranking._reranker import DEFAULT_RERANK, Reranker
from engramdb.shards import MAX_SHARDS, check_shards, placement
from engramdb.store import (
    FindContent,
    FindVectors,
    GetVectors,
    Op,
    PutItem,
    PutVector,
    RegisterSpace,
    Stats,
    StoreCapabilities,
    check_writable,
)
from engramdb.validate import Limits, Validator, check_float, check_int

__all__ = [
    "FlowContext",
    "OnEmbedError",
    "checked_space",
    "embed",
    "embeds",
    "own_vectors",
    "space_id",
    "supplied_vector",
    "vector_ops",
    "with_vectors",
]

OnEmbedError = Literal["lexical", "raise"]
MAX_RERANK = 1000
"""The most hits one recall may re-score (``recall(..., rerank=N)``)."""


@dataclass(frozen=True, slots=True)
class FlowContext:
    """What every flow of one memory runs with. Build it with :meth:`of`, which checks
    the settings; the fields are read-only."""

    embedder: Embedder
    clock: Clock
    check: Validator
    capabilities: StoreCapabilities
    redact: Callable[[str], str] | None = None
    on_embed_error: OnEmbedError = "lexical"
    keep_revisions: int = 10
    defer_embedding: bool = False
    reranker: Reranker | None = None  # the rerank stage's model (recall's ``rerank``)
    rerank_guard: RerankGuard | None = None  # its budget and breaker (with a reranker)
    shards: int = 1  # of how many stores of one tenant this is one (engramdb.shards)
    # Learned spaces already checked against the store's (see checked_space): a cache,
    # the one thing in a context that grows.
    known_spaces: set[str] = field(default_factory=set, compare=False, repr=False)

    @classmethod
    def of(
        cls,
        embedder: Embedder,
        *,
        clock: Clock,
        capabilities: StoreCapabilities | None = None,
        redact: Callable[[str], str] | None = None,
        on_embed_error: OnEmbedError = "lexical",
        limits: Limits | None = None,
        keep_revisions: int = 10,
        defer_embedding: bool = False,
        reranker: Reranker | None = None,
        rerank_guard: RerankGuard | None = None,
        shards: int = 1,
    ) -> FlowContext:
        """A context with its settings checked (a bad one raises ``ValidationError``).
        With a ``reranker`` and no ``rerank_guard``, the stage gets a guard of its own
        with the default budget and breaker. ``shards``: the store holds one of that many
        parts of its tenant's memories (``engramdb.shards``): its ranking estimates the
        whole tenant's noise floor."""
        if on_embed_error not in ("lexical", "raise"):
            raise ValidationError(
                f"on_embed_error={on_embed_error!r} is not supported; use 'lexical' or 'raise'"
            )
        if not all(callable(getattr(embedder, name, None)) for name in ("embed", "aembed")):
            raise ValidationError(
                f"embedder {embedder!r} must have embed() and aembed() methods and a space"
            )
        batch = getattr(reranker, "max_batch", None)
        if reranker is not None and (
            not all(callable(getattr(reranker, name, None)) for name in ("rerank", "arerank"))
            or isinstance(batch, bool)
            or not isinstance(batch, int)
            or batch < 1
        ):
            raise ValidationError(
                f"reranker {reranker!r} must have rerank() and arerank() methods, an id "
                "and a max_batch (engramdb.Reranker)"
            )
        if rerank_guard is not None and not isinstance(rerank_guard, RerankGuard):
            raise ValidationError(
                f"rerank_guard={shown(rerank_guard)} must be an engramdb.RerankGuard or None"
            )
        if reranker is not None and rerank_guard is None:
            rerank_guard = RerankGuard()
        shards = check_shards(shards)
        check = Validator(limits)
        capabilities = capabilities or StoreCapabilities()
        keep = check_int("keep_revisions", keep_revisions, 0, 1000)
        return cls(
            embedder,
            clock,
            check,
            capabilities,
            redact,
            on_embed_error,
            keep if capabilities.supports_history else 0,
            check.flag("defer_embedding", defer_embedding),
            reranker,
            rerank_guard,
            shards,
        )

    # -- arguments ----------------------------------------------------------------------

    def now(self) -> datetime:
        """The clock's reading at the millisecond precision stores keep (a naive reading
        is rejected with a clear message)."""
        return from_ms(to_ms(self.clock()))

    def document_text(self, text: object) -> str:
        """A memory's text, checked, then redacted and checked again."""
        checked = self.check.text(text)
        if self.redact is None:
            return checked
        redacted = self.redact(checked)
        if redacted is checked:  # nothing redacted (the usual case): checked already
            return checked
        return self.check.text(redacted, "text after redact()")

    def query_text(self, query: object) -> str:
        """A recall's query, checked, then redacted and checked again."""
        checked = self.check.text(query, "query")
        if self.redact is None:
            return checked
        return self.check.text(self.redact(checked), "query after redact()")

    def rerank_count(self, rerank: object) -> int:
        """How many fused hits a recall re-scores: ``rerank`` (0 to 1000; 0 is off), or
        when None, ``DEFAULT_RERANK`` with a reranker and 0 without. Asking for a rerank
        without a reranker is a ``ConfigurationError``."""
        if rerank is None:
            return DEFAULT_RERANK if self.reranker is not None else 0
        count = check_int("rerank", rerank, 0, MAX_RERANK)
        if count and self.reranker is None:
            raise ConfigurationError(
                f"rerank={count} needs a reranker: pass Memory(..., reranker=...) "
                "(e.g. reranker_from_url('cohere:rerank-v3.5')) or rerank=0"
            )
        return count

    def document_metadata(self, metadata: object) -> dict[str, object]:
        """Checked metadata, with ``redact`` applied to every string value in it."""
        checked = self.check.metadata(metadata)
        if self.redact is None or not checked:
            return checked
        return self.check.metadata(_redacted(checked, self.redact))

    def expires_at(self, expires_at: object) -> datetime | None:
        checked = self.check.expires_at(expires_at)
        if checked is not None and not self.capabilities.supports_ttl:
            raise ValidationError(
                "this store does not support expiry (supports_ttl is False); pass expires_at=None"
            )
        return checked

    def expiry(self, expires_at: object, ttl: object, now: datetime) -> datetime | None:
        """``expires_at``, or ``now`` + ``ttl`` (a ``timedelta`` or seconds); not both."""
        if ttl is None:
            return self.expires_at(expires_at)
        if expires_at is not None:
            raise ValidationError("pass expires_at or ttl, not both")
        if isinstance(ttl, int | float) and not isinstance(ttl, bool):
            ttl = timedelta(seconds=check_float("ttl", ttl, 0.001, 100 * 365 * 86400.0))
        if not isinstance(ttl, timedelta) or ttl <= timedelta(0):
            raise ValidationError(
                f"ttl={shown(ttl)} must be a positive timedelta or a number of seconds"
            )
        try:
            until = now + ttl
        except OverflowError:  # past datetime.max
            raise ValidationError(
                f"ttl={shown(ttl)} ends after the year 9999; pass a shorter ttl or none"
            ) from None
        return self.expires_at(until)

    def defer(self, value: object) -> bool:
        """A call's ``defer_embedding`` (None: the memory's default)."""
        return self.defer_embedding if value is None else self.check.flag("defer_embedding", value)

    def record(
        self,
        item: Mapping[str, Any],
        now: datetime,
        next_id: Callable[[int], str],
        *,
        text_checked: bool = False,
    ) -> MemoryRecord:
        """The record of ``item``; ``text_checked``: its text already went through
        :meth:`document_text` (checked and redacted once, e.g. before a labeler saw it)."""
        text = item["text"] if text_checked else self.document_text(item["text"])
        given = item.get("id")
        scope = validate_scope(item["scope"])
        if given is not None:
            memory_id = self.check.id(given)
        else:  # its id carries its text's place among 64 shards (engramdb.shards)
            memory_id = next_id(placement(scope, text, MAX_SHARDS))
        return MemoryRecord(
            id=memory_id,
            scope=scope,
            text=text,
            metadata=self.document_metadata(item.get("metadata")),
            labels=self.check.labels(item.get("labels")),
            importance=self.check.importance(item.get("importance", 0.5)),
            created_at=now,
            updated_at=now,
            expires_at=self.expiry(item.get("expires_at"), item.get("ttl"), now),
            revision=1,
            content_sha256=content_sha256(text),
        )

    def put(
        self,
        item: Mapping[str, Any],
        now: datetime,
        next_id: Callable[[int], str],
        *,
        text_checked: bool = False,
    ) -> PutItem:
        """The ``PutItem`` that stores ``item`` (see :meth:`record`)."""
        return PutItem(
            self.record(item, now, next_id, text_checked=text_checked),
            now,
            expected_revision=self.check.expected_revision(item.get("expected_revision")),
            keep_revisions=self.keep_revisions,
        )


# -- embedding steps ------------------------------------------------------------------------


def space_id(ctx: FlowContext) -> str | None:
    """The active space's id, or None while the embedder has not learned it yet."""
    try:
        return ctx.embedder.space.id
    except ConfigurationError:
        return None


def embeds(ctx: FlowContext) -> bool:
    """Whether the memory has an embedder: False for ``Memory(store, embedder=None,
    space=...)``, which stores only the vectors its caller passes (``OwnVectors``)."""
    return getattr(ctx.embedder, "embeds", True) is not False


def supplied_vector(ctx: FlowContext, vector: object) -> bytes:
    """A caller's own vector (``remember``/``recall``'s ``vector=``), checked as an
    embedder's answer is (:func:`_unit_blobs`): the active space's size, every component
    a finite number, not all zeros; answered as the same unit float32 bytes. A bad one
    is a ``ValidationError`` that names it and the space, raised before any effect (the
    caller's mistake: ``DimensionMismatchError`` is an embedder's, a 502 over HTTP)."""
    space = ctx.embedder.space  # ConfigurationError while an embedder has not learned it
    if (
        not isinstance(vector, list | tuple)
        or not vector
        or not all(is_finite_number(x) for x in vector)
    ):
        raise ValidationError(
            f"vector={shown(vector)} must be a list of {space.dimensions} finite numbers "
            f"(a vector of the space {space.id}); check your embedding pipeline's output"
        )
    if len(vector) != space.dimensions:
        raise ValidationError(  # not DimensionMismatchError: that one is an embedder's
            f"vector has {len(vector)} dimensions but this memory's space {space.id} has "
            f"{space.dimensions}; pass a vector of that space (the same model and size)"
        )
    try:
        return unit_f32(vector)
    except ValidationError as exc:  # all zeros: no direction
        raise ValidationError(f"vector={shown(vector)} cannot be stored: {exc}") from None


def own_vectors(ctx: FlowContext, supplied: Mapping[str, bytes], now: datetime) -> Flow[list[Op]]:
    """The ops that store the caller's own vectors ``supplied`` (content hash -> unit
    bytes) in the active space: those the store lacks. A store keeps one vector per
    text and space, and a caller's vector never replaces one: where the store holds
    another vector of that text, nothing is written and the caller is told
    (``ValidationError``); where it holds the same bytes, there is nothing to write."""
    if not supplied:
        return []
    space = ctx.embedder.space
    (stored,) = yield Store((GetVectors(space.id, tuple(supplied)),))
    if any(stored[sha][0] != blob for sha, blob in supplied.items() if sha in stored):
        raise ValidationError(
            f"vector= differs from the vector this store already holds for the same text in "
            f"the space {space.id} (a store keeps one vector per text and space, shared by "
            "the memories that hold the text); nothing was stored: pass that vector, or "
            "forget the memories holding the text first (docs/providers.md, Your own vectors)"
        )
    puts = [PutVector(space.id, sha, blob, now) for sha, blob in supplied.items()]
    return [RegisterSpace(space, now), *(op for op in puts if op.content_sha256 not in stored)]


def embed(ctx: FlowContext, texts: Sequence[str], kind: EmbedKind) -> Flow[list[bytes]]:
    """Embed ``texts`` in batches of ``max_batch``; unit float32 bytes out, in the order
    of ``texts``, all of the space the embedder has after the first batch. The batches
    are cut in length order, so that a local model pads each batch to texts of about one
    length (2x faster with sentence-transformers on short texts:
    ``python -m bench.embed_order``)."""
    blobs: list[bytes] = [b""] * len(texts)
    step = max(1, int(ctx.embedder.max_batch))
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
    first: EmbeddingSpace | None = None
    for start in range(0, len(order), step):
        positions = order[start : start + step]
        vectors = yield Embed(tuple(texts[i] for i in positions), kind)
        space = ctx.embedder.space
        if first is not None and space != first:
            raise ProviderError(
                f"the embedder's space changed from {first.id} to {space.id} within one "
                "call; nothing was stored, try again",
                provider=space.provider,
            )
        first = space
        for i, blob in zip(positions, _unit_blobs(vectors, len(positions), space), strict=True):
            blobs[i] = blob
    return blobs


def _unit_blobs(vectors: object, count: int, space: EmbeddingSpace) -> list[bytes]:
    """The embedder's answer as unit float32 blobs; a ``ProviderError`` (the embedder
    failed, not the caller) for a wrong count or size or an unusable vector."""
    if not isinstance(vectors, Sequence) or len(vectors) != count:
        got = len(vectors) if isinstance(vectors, Sequence) else type(vectors).__name__
        raise ProviderError(
            f"the embedder {space.id} returned {got} vectors for {count} texts; check the embedder",
            provider=space.provider,
        )
    blobs = []
    for vector in vectors:
        try:
            size: int | None = len(vector)
        except TypeError:
            size = None
        if size != space.dimensions:
            raise ProviderError(
                f"the embedder returned a vector of {size} dimensions but its space "
                f"{space.id} has {space.dimensions}; fix the embedder's dimensions",
                provider=space.provider,
            )
        try:
            blobs.append(unit_f32(vector))
        except ValidationError as exc:
            raise ProviderError(
                f"the embedder {space.id} returned an unusable vector ({exc})",
                provider=space.provider,
            ) from exc
    return blobs


_PROBE_TEXT = "engramdb: one short text to confirm the size of a new embedding space"
"""The fixed text :func:`checked_space` embeds, in a call of its own, to confirm a size
learned from an answer before a store first registers a space of that model."""


def checked_space(ctx: FlowContext, now: datetime) -> Flow[EmbeddingSpace]:
    """The embedder's space after an answer, checked against the store's spaces when its
    dimensions were learned from that answer.

    A space whose dimensions came from an answer is refused when the store holds the
    same model (and variant) with other dimensions (the answer was wrong, or the model
    changed, which only ``dimensions=`` may say). When the store holds no space of that
    model at all, nothing can vouch for the size: it is confirmed by embedding
    :data:`_PROBE_TEXT` in a separate call (an ``Embed`` effect; one extra call the
    first time a store meets a model), which must answer the same size. A refused or
    unconfirmed size is a ``ProviderError`` (nothing is stored; the caller may try
    again), and the embedder forgets it (``forget_dimensions()``) so that the next valid
    answer teaches it again."""
    space = ctx.embedder.space  # an embedder may learn its dimensions on first use
    if space.id in ctx.known_spaces or not _learned(ctx):
        return space
    (stats,) = yield Store((Stats(space.id, now),))
    if space.id not in stats.spaces:
        family = _family(space.id)
        stored = [other for other in stats.spaces if _family(other) == family]
        if stored:
            _forget_dimensions(ctx)
            raise ProviderError(
                f"the embedder answered vectors of {space.dimensions} dimensions but "
                f"the store holds {stored[0]} for that model; nothing was stored. If "
                f"the model's size really changed, pass dimensions={space.dimensions} "
                "to the embedder (a new space); otherwise try again",
                provider=space.provider,
            )
        yield from _confirm_size(ctx, space)
    ctx.known_spaces.add(space.id)
    return space


def _confirm_size(ctx: FlowContext, space: EmbeddingSpace) -> Flow[None]:
    """Embed :data:`_PROBE_TEXT` and require one usable vector of ``space``'s size from
    an embedder still in ``space``; otherwise forget the learned size and raise
    ``ProviderError`` (a failed call, e.g. ``ProviderHTTPError``, is raised as it is)."""
    try:
        vectors = yield Embed((_PROBE_TEXT,), "document")
    except ProviderError as exc:
        # An embedder that checks sizes itself (HTTPEmbedder) refuses the other size and
        # forgets the learned one; any other failure says nothing of the size.
        disagreed = space_id(ctx) != space.id or not _learned(ctx)
        _forget_dimensions(ctx)
        if not disagreed:
            raise
        raise _unconfirmed(space, str(exc)) from exc
    try:
        _unit_blobs(vectors, 1, space)
        if space_id(ctx) != space.id:
            raise ProviderError(f"the embedder's space is now {space_id(ctx)}")
    except ProviderError as exc:
        _forget_dimensions(ctx)
        raise _unconfirmed(space, str(exc)) from exc


def _unconfirmed(space: EmbeddingSpace, why: str) -> ProviderError:
    return ProviderError(
        f"the embedder's answer gave {space.id}, a space new to this store, and a second "
        f"call to confirm its size disagreed ({why}); nothing was stored and the size "
        "is forgotten: try again, or pass dimensions= to the embedder",
        provider=space.provider,
    )


def _learned(ctx: FlowContext) -> bool:
    return bool(getattr(ctx.embedder, "dimensions_learned", False))


def _forget_dimensions(ctx: FlowContext) -> None:
    """Make the embedder forget a learned size, so the next valid answer teaches it."""
    forget = getattr(ctx.embedder, "forget_dimensions", None)
    if callable(forget):
        forget()


def vector_ops(
    ctx: FlowContext,
    hashes: Sequence[str],
    texts: Sequence[str],
    now: datetime,
    replace: bool = False,
) -> Flow[list[Op]]:
    """Embed ``texts`` (whose content hashes are ``hashes``) as documents: the ops that
    register the space and put their vectors (``replace``: over a stored one)."""
    if not hashes:
        return []
    blobs = yield from embed(ctx, texts, "document")
    space = yield from checked_space(ctx, now)
    return [
        RegisterSpace(space, now),
        *(
            PutVector(space.id, sha, blob, now, replace)
            for sha, blob in zip(hashes, blobs, strict=True)
        ),
    ]


def with_vectors(
    ctx: FlowContext,
    texts: Mapping[str, str],
    writes: Sequence[Op],
    now: datetime,
    defer: bool = False,
    *,
    owners: Mapping[str, Collection[Scope | None]] | None = None,
    supplied: Mapping[str, bytes] | None = None,
) -> Flow[list[Any]]:
    """Run ``writes`` in one atomic batch with the vectors that their texts (hash ->
    text) lack in the active space, embedded now; return the writes' results.

    ``owners`` maps each hash to the scopes that write it (``None`` for a scope known
    to hold no such text, or not known). A stored vector is then reused only for a text
    that every one of its scopes already holds in a live item: a scope's embedding
    calls, and so what it can learn, never depend on another scope holding the same text
    (the trust domain of vectors is the scope; see docs/concepts.md). Any other text is
    embedded and put without replacing a stored vector, unless the stored one is not
    the embedder's vector of the text (a cosine to the fresh one below
    :data:`SAME_TEXT_COSINE`: a caller's own vector, see :func:`own_vectors`): then the
    fresh vector replaces it right after the write, so a caller's vector never scores
    another scope's memory. Without ``owners`` (a caller that owns the whole store), any
    stored vector is reused.

    The vectors reused are looked up again inside the batch: if another writer's forget
    collected one in between (its last holder went), it is embedded and put in a
    follow-up batch, so no written item is left without its vector. With ``defer``,
    nothing is embedded: the items are pending until ``maintain()`` or ``reindex()``
    embeds them (the lexical leg finds them at once). On a read-only store the writes
    are refused before anything is embedded (the store would refuse them after).

    ``supplied`` holds the caller's own vectors (hash -> unit bytes, checked by
    :func:`supplied_vector`): their texts are not embedded, and they are stored as
    :func:`own_vectors` says, with or without ``defer``.
    """
    if ctx.capabilities.read_only:
        check_writable(writes, "this store")
    texts = {sha: text for sha, text in texts.items() if sha not in (supplied or {})}
    if texts and not embeds(ctx):  # not even deferred: no embedder will ever come
        ctx.embedder.embed(list(texts.values()), "document")  # which refuses, naming the fix
    own = yield from own_vectors(ctx, supplied or {}, now)
    if defer or not texts:
        return list((yield Store((*own, *writes))))[len(own) :]
    active = space_id(ctx)
    present: frozenset[str] = frozenset()  # an unknown space has no vectors yet
    if active is not None and texts:
        present = yield from _reusable(active, texts, owners, now)
    missing = sorted(sha for sha in texts if sha not in present)
    embedded = yield from vector_ops(ctx, missing, [texts[s] for s in missing], now)
    added = [*own, *embedded]
    fresh = {op.content_sha256: op for op in embedded if isinstance(op, PutVector)}
    spaces = {op.space_id for op in fresh.values()}
    check = [GetVectors(spaces.pop(), tuple(fresh))] if fresh else []  # what the store kept
    recheck = [FindVectors(active, tuple(sorted(present)))] if active and present else []
    results = yield Store((*added, *writes, *check, *recheck))
    kept = results[len(added) + len(writes)] if check else {}
    foreign = [op for sha, op in fresh.items() if not _same_text(kept.get(sha), op.vector)]
    if foreign:
        yield Store(
            tuple(
                PutVector(op.space_id, op.content_sha256, op.vector, op.embedded_at, True)
                for op in foreign
            )
        )
    lost = sorted(present - results[-1]) if recheck else []
    if lost:
        yield Store(tuple((yield from vector_ops(ctx, lost, [texts[s] for s in lost], now))))
    return list(results[len(added) : len(added) + len(writes)])


SAME_TEXT_COSINE = 0.99
"""The cosine above which a stored vector is taken for the embedder's own vector of its
text (the same model answers the same text above 0.999 across hardware and calls; a
vector of another text or model is far below 0.99: ``engramdb.vector_check``)."""


def _same_text(stored: tuple[bytes, datetime] | None, fresh: bytes) -> bool:
    """Whether the ``stored`` vector (bytes, time; None: none) is the embedder's vector
    of the text it just embedded as ``fresh`` (both unit float32). A stored vector that
    does not decode is not (the fresh one then repairs it)."""
    if stored is None or stored[0] == fresh:
        return True
    if len(stored[0]) != len(fresh):
        return False
    try:
        old = decode_f32(stored[0])
    except CorruptDataError:
        return False
    return math.fsum(a * b for a, b in zip(old, decode_f32(fresh), strict=True)) >= (
        SAME_TEXT_COSINE
    )


def _reusable(
    active: str,
    texts: Mapping[str, str],
    owners: Mapping[str, Collection[Scope | None]] | None,
    now: datetime,
) -> Flow[frozenset[str]]:
    """The hashes of ``texts`` whose stored vector in ``active`` a write may reuse: all
    those stored without ``owners``; with them, those that every owner scope holds."""
    hashes = tuple(texts)
    if owners is None:
        (present,) = yield Store((FindVectors(active, hashes),))
        return frozenset(present)
    known = {sha: set(owners.get(sha, (None,))) or {None} for sha in hashes}
    pairs = tuple(
        sorted({(scope, sha) for sha, of in known.items() for scope in of if scope is not None})
    )
    if not pairs:
        return frozenset()
    present, held = yield Store((FindVectors(active, hashes), FindContent(pairs, now)))
    return frozenset(
        sha for sha in present if all(s is not None and (s, sha) in held for s in known[sha])
    )


def _family(space: str) -> tuple[str, str]:
    """A space id without its dimensions: ``("openai/m", "variant")`` for
    ``openai/m@512#variant`` (a provider or model never holds ``@`` or ``#``)."""
    base, _, variant = space.partition("#")
    return base.rpartition("@")[0], variant


def _redacted(value: Any, redact: Callable[[str], str]) -> Any:
    """``value`` (JSON-like) with ``redact`` applied to each string that is a value."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redacted(v, redact) for v in value]
    if isinstance(value, dict):
        return {k: _redacted(v, redact) for k, v in value.items()}
    return value
