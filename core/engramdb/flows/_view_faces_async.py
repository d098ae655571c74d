"""The bound view's face, written once: ``AsyncBoundMemory``'s operations, each with its
declaration (``@view_op``: ``engramdb.flows._view_ops``). ``tools/unasync.py`` generates
``BoundMemory`` from this file into ``_view_faces_sync.py``, and the client's faces from
its operations that have an HTTP route; what differs in substance lives in the views'
lifecycle bases (``_bound.py``)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from engramdb._base.types import Hits, MemoryRecord, RecallMode, Remembered, Scope
from engramdb.documents import (
    DEFAULT_MAX_CHARS,
    Document,
    DocumentSummary,
    DocumentUpload,
)
from engramdb.flows._bound import _AsyncBoundMemoryBase
from engramdb.flows._bound_flows import BoundStatus, Durability
from engramdb.flows._bound_writes import (
    DocumentSteps,
    Label,
    Outcome,
    document_pairs,
    record,
    record_id,
)
from engramdb.flows._conversations import MAX_CONVERSATION_CHARS
from engramdb.flows._effects import Flow
from engramdb.flows._operations import UNSET
from engramdb.flows._trampoline import arun
from engramdb.flows._view_ops import (
    BATCH_ITEMS,
    CONTEXT,
    DEDUPE,
    DEFAULT_TOP_K,
    DOCUMENT_TEXT,
    DURABILITY,
    EMBEDS,
    EXPIRES_AT,
    FILTER,
    ID,
    ID_SCHEMA,
    IMPORTANCE,
    ITEM_PATH,
    LABELS,
    MAX_BATCH_ITEMS,
    MAX_CHARS,
    MAX_PARTS,
    MAX_RECENT,
    MAX_TOOL_TOP_K,
    METADATA,
    NO_BATCH,
    NO_DOCUMENT_BATCH,
    POSITION_SCHEMA,
    QUERY_VECTOR,
    SCOPE_CURSOR,
    SHA256_SCHEMA,
    SMALL_TOOLSET,
    SOURCE,
    TEXT,
    TEXT_SCHEMA,
    TOOL_CONTEXT,
    TOOL_LABELS,
    TTL,
    TURNS,
    Field,
    Route,
    Tool,
    completed_answer,
    completed_read,
    deleted_answer,
    deleted_read,
    document_answer,
    document_read,
    history_answer,
    history_read,
    hits_answer,
    hits_read,
    limit,
    memories_answer,
    memories_read,
    memory_answer,
    memory_read,
    page_answer,
    position,
    position_json,
    scope_deleted_answer,
    scope_page_answer,
    scope_page_read,
    source_deleted_answer,
    status_answer,
    status_read,
    upload_answer,
    upload_read,
    view_op,
)
from engramdb.ranking._hits import Fusion
from engramdb.store import ScopeCount

__all__ = ["AsyncBoundMemory"]

T = TypeVar("T")


class AsyncBoundMemory(_AsyncBoundMemoryBase):
    __doc__ = _AsyncBoundMemoryBase.__doc__

    @view_op(
        "Remember a text in your scope",
        fields=(TEXT, METADATA, LABELS, IMPORTANCE, EXPIRES_AT, TTL),
        route=Route(
            "POST",
            "/v1/memories",
            "Memory",
            status=201,
            errors=EMBEDS,
            headers={"Location": "the new memory's path, /v1/memories/{id}"},
        ),
        tool=Tool(
            "remember",
            "Save one durable fact, preference or instruction worth recalling in later "
            "conversations (a short, self-contained sentence). Use it when the user states "
            "something that will matter again; do not save small talk or secrets.",
            (
                Field("text", {"type": "string"}, "The fact, as one sentence.", required=True),
                DURABILITY,
                TOOL_LABELS,
                Field(
                    "importance",
                    {"type": "number", "minimum": 0, "maximum": 1},
                    "How much it matters, 0 to 1 (default 0.5).",
                ),
                Field(
                    "ttl_seconds",
                    {"type": "number", "exclusiveMinimum": 0},
                    "Forget it after this many seconds.",
                ),
                Field(
                    "expires_at",
                    {"type": "string", "format": "date-time"},
                    "Forget it at this time (ISO 8601 with a timezone).",
                ),
            ),
        ),
        cli="remember",
        answer=memory_answer,
        read=memory_read,
    )
    async def remember(
        self,
        text: str,
        *,
        durability: Durability = "shared",
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        importance: float = 0.5,
        expires_at: Any = None,
        ttl: Any = None,
        vector: Sequence[float] | None = None,
    ) -> Remembered:
        """Remember ``text`` in the bound scope (``durability="session"``: the bound
        session's scope). ``ttl`` (a ``timedelta`` or seconds) or ``expires_at`` sets an
        expiry. Labels are normalised and held to the view's label rules; the labeler's
        labels fill the names not given (best effort: its failure adds none, and so does
        an async labeler's timeout; a sync view runs no async labeler). The answer is the
        record, with ``dropped``: how many memories the scope's capacity
        (``Policy(max_items=...)``) dropped in the same write. ``vector``: your own
        vector of the text, as ``Memory.remember`` takes it."""
        checked, scope, given, fields = self._prepare(
            text,
            durability,
            labels,
            metadata=metadata,
            importance=importance,
            expires_at=expires_at,
            ttl=ttl,
            vector=vector,
        )
        automatic = await self._proposed(checked)
        return await self._run(self._bound.remember(checked, scope, given, automatic, **fields))

    @view_op(
        "The memories of your scopes that best answer a query",
        fields=(
            Field("query", TEXT_SCHEMA, "what to look for", required=True),
            Field(
                "top_k",
                {"type": ["integer", "null"], "minimum": 1, "default": DEFAULT_TOP_K},
                "how many hits to answer",
            ),
            Field("mode", {"enum": ["hybrid", "vector", "lexical", None]}, "which legs search"),
            FILTER,
            Field("min_similarity", {"type": ["number", "null"]}, "the vector leg's floor"),
            LABELS,
            Field("fusion", {"enum": ["convex", "rrf", None]}, "how the legs' ranks combine"),
            Field(
                "weights",
                {"type": ["object", "null"], "additionalProperties": {"type": "number"}},
                'each leg\'s weight in the fusion, e.g. {"vector": 0.7, "lexical": 0.3}',
            ),
            Field("exact", {"type": ["boolean", "null"]}, "search every vector (no index)"),
            Field(
                "rerank",
                {"type": ["integer", "null"], "minimum": 0},
                "hits the server's reranker re-scores (400 without one)",
            ),
            CONTEXT,
            QUERY_VECTOR,
        ),
        route=Route("POST", "/v1/recall", "Hits", errors=EMBEDS),
        tool=Tool(
            "recall",
            "Search long-term memory for facts relevant to the current task before answering "
            "a question about the user, past decisions or preferences. Returns memories with "
            "ids; cite the ids you use.",
            (
                Field("query", {"type": "string"}, "What to look for, in a few words.", True),
                Field(
                    "top_k",
                    {"type": "integer", "minimum": 1, "maximum": MAX_TOOL_TOP_K, "default": 5},
                    "How many memories to answer.",
                ),
                TOOL_LABELS,
                TOOL_CONTEXT,
            ),
        ),
        cli="recall",
        answer=hits_answer,
        read=hits_read,
    )
    async def recall(
        self,
        query: str,
        *,
        top_k: int = 5,
        labels: Mapping[str, list[str]] | None = None,
        mode: RecallMode = "hybrid",
        min_similarity: float | None = None,
        filter: Mapping[str, Any] | None = None,
        fusion: Fusion = "convex",
        weights: Mapping[str, float] | None = None,
        exact: bool = False,
        rerank: int | None = None,
        context: int = 0,
        vector: Sequence[float] | None = None,
    ) -> Hits:
        """Recall from the bound scope, the session and the read scopes, with the view's
        policy; ``labels`` is the label context of this work (for utility per context).
        ``rerank``: how many hits of the policy's order the memory's reranker re-scores
        (as ``Memory.recall``). ``context``: each hit that is a turn of a conversation
        comes with up to this many turns before and after it (``hit.context``), from its
        own scope.
        ``vector`` is your own query vector (as ``Memory.recall`` takes it). The hits'
        ``selection_id`` is the receipt ``complete()`` accepts."""
        return await self._run(
            self._bound.recall(
                query,
                top_k=top_k,
                labels=labels,
                mode=mode,
                min_similarity=min_similarity,
                filter=filter,
                fusion=fusion,
                weights=weights,
                exact=exact,
                rerank=rerank,
                context=context,
                vector=vector,
            )
        )

    @view_op(
        "A memory of your scopes",
        fields=(ID,),
        route=Route("GET", ITEM_PATH, "Memory", errors=("not_found",)),
        cli="get",
        answer=memory_answer,
        read=memory_read,
        absent=None,
        not_offered={"tool": SMALL_TOOLSET},
    )
    async def get(self, id: str) -> MemoryRecord | None:
        """The memory ``id`` with its ``utility`` if the view can see it, else None
        (counts no exposure)."""
        return await self._run(self._bound.get(id))

    @view_op(
        "Forget a memory of your scope",
        fields=(ID,),
        route=Route("DELETE", ITEM_PATH, "Deleted", errors=("not_found",)),
        tool=Tool(
            "forget",
            "Delete a memory by id when the user asks to forget it or it is wrong or outdated.",
            (Field("id", {"type": "string"}, "The memory's id.", required=True),),
        ),
        cli="forget",
        answer=deleted_answer,
        read=deleted_read,
        absent=False,
    )
    async def forget(self, id: str) -> bool:
        """Delete the memory ``id`` of the bound scope or session; False otherwise."""
        return await self._run(self._bound.forget(id))

    @view_op(
        "Score the memories a recall answered, once per selection",
        fields=(
            Field(
                "selection_id", {"type": "string", "minLength": 1}, "recall's selection_id.", True
            ),
            Field("score", {"type": "number", "minimum": -1, "maximum": 1}, "-1 to 1", True),
        ),
        route=Route("POST", "/v1/complete", "Completed"),
        tool=Tool(
            "complete",
            "After finishing the task a recall served, say once how much its memories helped: "
            "score 1 (they answered it) to -1 (they misled you). Pass the selection_id that "
            "recall returned; each selection accepts one score.",
        ),
        answer=completed_answer,
        read=completed_read,
        not_offered={"cli": "a CLI run has no recall to score: its selection ends with it"},
    )
    async def complete(self, selection_id: str, score: float) -> bool:
        """Apply ``score`` in [-1, 1] to the memories a recall returned, once: True the
        first time, False for a used, expired, evicted or unknown selection."""
        return await self._run(self._bound.complete(selection_id, score))

    @view_op(
        "Set (null: clear) a memory's manual value",
        fields=(
            Field("memory_id", {"type": "string", "minLength": 1}, "The memory's id.", True),
            Field(
                "value",
                {"type": ["number", "null"], "minimum": -1, "maximum": 1},
                "-1 (misleading) to 1 (helpful), or null to clear.",
                required=True,
                null_is_value=True,
            ),
        ),
        route=Route("POST", "/v1/feedback", "Memory", errors=("not_found",)),
        tool=Tool(
            "feedback",
            "Mark one memory as helpful (value up to 1) or misleading (down to -1) when the "
            "user confirms or corrects it; null clears the mark. Use the id recall or "
            "list_recent returned.",
        ),
        cli="feedback",
        answer=memory_answer,
        read=memory_read,
        absent=None,
    )
    async def feedback(self, memory_id: str, value: float | None) -> MemoryRecord | None:
        """Set (``None``: clear) the manual value in [-1, 1] of a memory of the bound
        scope or session; the record after it, or None when there is no such memory."""
        return await self._run(self._bound.feedback(memory_id, value))

    @view_op(
        f"Remember 1 to {MAX_BATCH_ITEMS} texts at once (all are checked before any is stored)",
        fields=(
            Field("items", BATCH_ITEMS, "the memories to store", True, wire="memories"),
            Field("dedupe", {"type": ["boolean", "null"], "default": True}, DEDUPE),
        ),
        route=Route("POST", "/v1/memories/batch", "Memories", status=201, errors=EMBEDS),
        cli="import",
        answer=memories_answer,
        read=memories_read,
        not_offered={"tool": NO_BATCH},
    )
    async def remember_many(
        self, items: Iterable[Mapping[str, Any]], *, batch_size: int = 256, dedupe: bool = True
    ) -> list[MemoryRecord]:
        """Remember many items (dicts with ``text`` and any of ``durability``,
        ``metadata``, ``labels``, ``importance``, ``ttl``, ``expires_at``, ``vector``), each as
        :meth:`remember` would: all are checked first, then the labeler labels each, then
        they are stored ``batch_size`` at a time, each batch atomic with the capacity's
        drops. Items whose text their scope already holds answer the existing record
        (``dedupe=False`` stores copies)."""
        prepared = self._prepare_many(items)
        automatic = [await self._proposed(text) for text, *_ in prepared]
        rows = self._rows(prepared, automatic)
        return await self._run(self._bound.remember_many(rows, batch_size, dedupe))

    @view_op(
        "Remember the turns of a conversation (each once, in one atomic write)",
        fields=(
            TURNS,
            Field(
                "conversation",
                {"type": "string", "minLength": 1, "maxLength": MAX_CONVERSATION_CHARS},
                "the conversation's id, e.g. 'support-4711'",
                required=True,
            ),
            Field(
                "start",
                {"type": ["integer", "null"], "minimum": 0, "default": 0},
                "the place of the first turn sent (to send a conversation in parts)",
            ),
            METADATA,
            LABELS,
        ),
        route=Route("POST", "/v1/conversations", "Memories", status=201, errors=EMBEDS),
        tool=Tool(
            "remember_conversation",
            "Save the turns of a conversation (who spoke, what was said, when) so that a "
            "later recall can answer a turn with the turns around it. Send the whole "
            "conversation again as it grows: turns already saved are not saved twice.",
            ("turns", "conversation", "start"),
        ),
        cli="remember-conversation",
        answer=memories_answer,
        read=memories_read,
    )
    async def remember_conversation(
        self,
        turns: Iterable[Mapping[str, Any]],
        *,
        conversation: str,
        start: int = 0,
        durability: Durability = "shared",
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
    ) -> list[MemoryRecord]:
        """Remember each turn (``{"speaker", "text", "at"?, "metadata"?}``) of the
        conversation ``conversation`` as a memory of the bound scope (``durability=
        "session"``: the bound session's) whose metadata holds ``conversation``,
        ``turn`` (``start`` + its index), ``speaker`` and ``at``; a place the scope
        already holds is not stored again (its record answers). Every turn is checked
        and labelled first, then the new ones are stored in one atomic batch. The answer
        is a record per turn, in turn order (``docs/conversations.md``)."""
        prepared = self._prepare_turns(turns, conversation, start, durability, metadata, labels)
        automatic = [await self._proposed(text) for text, *_ in prepared]
        return await self._run(self._turns(self._rows(prepared, automatic)))

    @view_op(
        "A memory's earlier revisions, newest first",
        fields=(ID, limit(10)),
        route=Route("GET", ITEM_PATH + "/history", "History", errors=("not_found",)),
        cli="history",
        answer=history_answer,
        read=history_read,
        absent=None,
        not_offered={"tool": SMALL_TOOLSET},
    )
    async def history(self, id: str, limit: int = 10) -> list[MemoryRecord] | None:
        """Earlier revisions of a memory the view can see, newest first (``[]`` if it
        has none); None when the view cannot see it."""
        return await self._run(self._bound.history(id, limit))

    @view_op(
        "Change a memory of your scope (a compare-and-set with expected_revision)",
        fields=(
            ID,
            Field("text", TEXT_SCHEMA, "the new text"),
            Field("metadata", {"type": "object"}, "the new metadata"),
            Field("labels", {**LABELS.schema, "type": "object"}, "the new labels"),
            Field("importance", {"type": "number", "minimum": 0, "maximum": 1}, "0 to 1"),
            Field(
                "expires_at",
                EXPIRES_AT.schema,
                "the new expiry (null: never)",
                decode=EXPIRES_AT.decode,
                encode=EXPIRES_AT.encode,
                null_is_value=True,
            ),
            Field(
                "expected_revision",
                {"type": ["integer", "null"]},
                "the revision you read; else 409 revision_conflict",
            ),
        ),
        route=Route(
            "PATCH",
            ITEM_PATH,
            "Memory",
            errors=("not_found", "revision_conflict", *EMBEDS),
            one_of=("text", "metadata", "labels", "importance", "expires_at"),
        ),
        cli="update",
        answer=memory_answer,
        read=memory_read,
        absent=None,
        not_offered={"tool": SMALL_TOOLSET},
    )
    async def update(
        self,
        id: str,
        *,
        text: Any = UNSET,
        metadata: Any = UNSET,
        labels: Any = UNSET,
        importance: Any = UNSET,
        expires_at: Any = UNSET,
        expected_revision: int | None = None,
    ) -> MemoryRecord | None:
        """Change the given fields of a memory of the bound scope or session, atomically
        (labels held to the view's label rules); the record after it, or None when there
        is no such memory. The store checks the scope in the write itself, so a memory
        moved out of the view meanwhile is not changed. ``ConflictError`` when
        ``expected_revision`` is given and the memory is at another revision."""
        return await self._run(
            self._bound.update(
                id,
                text=text,
                metadata=metadata,
                labels=labels,
                importance=importance,
                expires_at=expires_at,
                expected_revision=expected_revision,
            )
        )

    @view_op(
        "Remember a long text as chunks, each a memory that says where in its source it is",
        fields=(DOCUMENT_TEXT, SOURCE, MAX_CHARS, METADATA, LABELS),
        route=Route("POST", "/v1/documents", "Document", status=201, errors=EMBEDS),
        tool=Tool(
            "remember_document",
            "Save a long text the user gives you to keep (notes, a page, a file's "
            "contents) as searchable chunks under a source name; the same source again "
            "replaces it. Recall then finds its passages, each with its source and lines.",
            (
                Field("text", {"type": "string"}, "The whole text.", required=True),
                Field(
                    "source",
                    {"type": "string"},
                    "A name for it, e.g. a path or a title ('notes/trip.md').",
                    required=True,
                ),
                TOOL_LABELS,
            ),
        ),
        cli="import",
        answer=document_answer,
        read=document_read,
    )
    async def remember_document(
        self,
        text: str,
        *,
        source: str,
        max_chars: int = DEFAULT_MAX_CHARS,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
    ) -> Document:
        """Remember a long ``text`` as chunks of at most ``max_chars`` characters cut on
        its natural boundaries, each a memory of the bound scope whose metadata says
        where in ``source`` it comes from (``engramdb.documents``). The same source with
        the same text adds nothing; with another text, its new chunks replace the old.
        The text is checked before anything is computed from it or stored."""
        steps = self._documents([(source, text)], max_chars, metadata, labels, None, record)
        (document,) = await self._steps(steps)
        return Document(*document)

    @view_op(
        f"Send a document in parts (1 to {MAX_PARTS}): nothing is stored before the last "
        "arrives, then the whole text is remembered as remember_document does",
        fields=(
            DOCUMENT_TEXT,
            SOURCE,
            Field("part", {"type": "integer", "minimum": 0}, "this part's position", True),
            Field(
                "parts",
                {"type": "integer", "minimum": 1, "maximum": MAX_PARTS},
                "how many parts the text is sent in",
                True,
            ),
            Field("sha256", SHA256_SCHEMA, "the SHA-256 of the whole text's UTF-8", True),
            MAX_CHARS,
            METADATA,
            LABELS,
        ),
        route=Route("POST", "/v1/documents/parts", "DocumentUpload", errors=EMBEDS),
        answer=upload_answer,
        read=upload_read,
        not_offered={
            "tool": "not a tool: a model sends a text whole (remember_document)",
            "cli": "the CLI reads a file whole: engramdb import FOLDER",
        },
    )
    async def remember_document_part(
        self,
        text: str,
        *,
        source: str,
        part: int,
        parts: int,
        sha256: str,
        max_chars: int = DEFAULT_MAX_CHARS,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
    ) -> DocumentUpload:
        """Hold ``text`` as part ``part`` (from 0) of a document of ``source`` sent in
        ``parts`` parts, whose whole text has the SHA-256 ``sha256``; the call that
        completes the parts remembers their text as :meth:`remember_document` does
        (with its ``max_chars``, ``metadata`` and ``labels``). Nothing of the document is
        stored before; the parts are held by the memory, in memory, and a restart
        forgets them (the answer's ``received`` says which it holds)."""
        key, held, whole = self._part(text, source, sha256, part, parts)
        if whole is None:
            return DocumentUpload(source, sha256, parts, tuple(sorted(held)), None)
        steps = self._documents([(source, whole)], max_chars, metadata, labels, None, record)
        (document,) = await self._steps(steps)
        self._bound_uploads.drop(key)
        return DocumentUpload(source, sha256, parts, tuple(range(parts)), Document(*document))

    @view_op(
        "Remember many long texts as chunks",
        cli="import",
        not_offered={"http": NO_DOCUMENT_BATCH, "client": NO_DOCUMENT_BATCH, "tool": NO_BATCH},
    )
    async def remember_documents(
        self,
        documents: Mapping[str, str],
        *,
        max_chars: int = DEFAULT_MAX_CHARS,
        metadata: Mapping[str, object] | None = None,
        labels: Mapping[str, list[str]] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[DocumentSummary]:
        """Remember many documents (``{source: text}``), each as
        :meth:`remember_document` does, in order, with one read of what the scope holds
        of them (not one per document: re-importing a folder costs time in proportion
        to its size). Every document and every chunk to store is checked before
        anything is stored; ``progress(done, total)`` is called after each document.
        The answer holds the chunks' ids, not their records."""
        pairs = document_pairs(documents)
        steps = self._documents(pairs, max_chars, metadata, labels, progress, record_id)
        return [DocumentSummary(*document) for document in await self._steps(steps)]

    async def _steps(self, steps: DocumentSteps[T]) -> list[Outcome[T]]:
        async def perform(step: Flow[Any] | Label) -> Any:
            if isinstance(step, Label):
                return [await self._proposed(text) for text in step.texts]
            return await self._run(step)

        return await arun(steps, perform)

    @view_op(
        "Forget every chunk of a document",
        fields=(SOURCE,),
        route=Route("DELETE", "/v1/documents", "SourceDeleted", summed="deleted"),
        answer=source_deleted_answer,
        read=deleted_read,
        not_offered={
            "tool": "not a tool: a model forgets one memory at a time (forget); dropping a "
            "whole document is the operator's call",
            "cli": "no CLI command yet: re-import the folder (issue 49)",
        },
    )
    async def forget_document(self, source: str) -> int:
        """Forget every chunk of the document of ``source``; return how many."""
        return await self._run(self._forget_document(source))

    @view_op(
        "Forget every memory of your scope (not the scopes under it)",
        route=Route("DELETE", "/v1/scope", "ScopeDeleted", summed="deleted"),
        cli="forget",
        answer=scope_deleted_answer,
        read=deleted_read,
        not_offered={"tool": "not a tool: a model may not delete a whole scope"},
    )
    async def forget_all(self) -> int:
        """Delete every memory of the bound scope and session; return how many."""
        return await self._run(self._bound.forget_all())

    @view_op(
        "Your scope and the scopes under it that hold memories",
        fields=(limit(100), SCOPE_CURSOR),
        route=Route("GET", "/v1/scopes", "ScopePage"),
        cli="scopes",
        answer=scope_page_answer,
        read=scope_page_read,
        not_offered={"tool": SMALL_TOOLSET},
    )
    async def list_scopes(self, limit: int = 100, cursor: Scope | None = None) -> list[ScopeCount]:
        """The scopes under the bound scope (itself included) that hold memories, with
        counts, in scope order; ``cursor`` is the last scope of the previous page."""
        return await self._run(self._bound.list_scopes(limit, cursor))

    @view_op(
        "Your scope, its count, the embedding space and the maintainer's state",
        route=Route("GET", "/v1/status", "Status", summed="items"),
        tool=Tool(
            "status",
            "Report this memory's health: how many memories it holds, the active embedding "
            "space and the schema version. Use it when recall seems to miss things.",
            (),
        ),
        cli="status",
        answer=status_answer,
        read=status_read,
    )
    async def status(self) -> BoundStatus:
        """The view's scope and session, how many memories they hold, the active space
        and the schema version, and the memory's own maintainer's state
        (``maintenance``): nothing that counts another scope's data."""
        return self._with_maintenance(await self._run(self._bound.status(self.space)))

    @view_op(
        "Your scope's memories, newest first",
        fields=(
            limit(50),
            Field("before", ID_SCHEMA, "the id to list from (exclusive)"),
            FILTER,
            Field(
                "below",
                POSITION_SCHEMA,
                "a position [created_at, id] to list strictly below",
                decode=position,
                encode=position_json,
            ),
        ),
        route=Route("GET", "/v1/memories", "MemoryPage"),
        tool=Tool(
            "list_recent",
            "List the newest memories saved here (newest first), e.g. to review what you "
            "remembered in this conversation or to find an id to forget. Use recall to search.",
            (
                Field(
                    "limit",
                    {"type": "integer", "minimum": 1, "maximum": MAX_RECENT, "default": 10},
                    "How many to list.",
                ),
            ),
        ),
        cli="list",
        answer=page_answer,
        read=memories_read,
    )
    async def list(
        self,
        limit: int = 50,
        before: str | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
        below: tuple[datetime, str] | None = None,
    ) -> builtins.list[MemoryRecord]:  # its own name is the method's in the class
        """Memories of the bound scope and session, newest first; ``before`` is the id to
        continue after; ``below`` a position ``(created_at, id)`` to continue strictly
        below, whether or not a memory holds it (a page's last memory, forgotten since;
        another shard's: ``engramdb.shards``)."""
        return await self._run(self._bound.list(limit, before, filter, below))

    @view_op(
        "How many memories your scope holds",
        route=Route(
            "GET",
            "/v1/count",
            {
                "type": "object",
                "properties": {"count": {"type": "integer", "minimum": 0}},
                "required": ["count"],
                "additionalProperties": False,
            },
            summed="count",
        ),
        tool=Tool(
            "count",
            "Count the memories saved here (this scope and session), e.g. before listing "
            "them or to tell the user how much is remembered.",
            (),
        ),
        cli="count",
        answer=lambda count, args: {"count": count},
        read=lambda answer, args: answer["count"],
    )
    async def count(self) -> int:
        """How many live memories the bound scope and session hold (what ``status()``
        reports as ``items``, without the maintainer's state)."""
        status = await self._run(self._bound.status(self.space))
        return status.items
