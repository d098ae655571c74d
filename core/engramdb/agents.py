"""Memory as tools for agents, and the helpers a tool host (the MCP server) shares.

What an agent loop needs: tool specs and a dispatcher, a retriever, a context block.
Every piece acts through a bound view (``memory.bind(...)``), so the scope is the
operator's choice: no tool argument can name one (the specs have no such parameter, and
the dispatcher refuses any argument it does not know). A tool call that fails, whatever
the reason, comes back as ``{"error": ...}``, never as an exception that would end the
agent's loop.

:func:`memory_tools` (tool specs and a dispatcher over a bound view), :func:`retriever`
and :func:`format_context` are also exported from ``engramdb``; :func:`estimate_tokens`
is the token count a context block's ``budget_tokens=`` uses by default. A host that
serves the tools over its own transport checks a call the way :class:`MemoryTools` does:

* :func:`tool_arguments`: a call's arguments, JSON text or a mapping, as a dict;
* :func:`only_fields`: refuse arguments a tool's spec does not declare, or a missing
  required one;
* :func:`tool_error`: an exception as the tool result a model sees (an ``EngramError``
  says what was wrong; anything else is a generic failure that leaks no detail).

Public and stable (``docs/stores.md``, "The driver kit"). Standard library only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engramdb._base.errors import EngramError, NotFoundError, ValidationError, shown
from engramdb._base.types import Hit, Hits, MemoryRecord, Remembered
from engramdb._embedders.wordpiece import WordPieceTokenizer
from engramdb.documents import Document
from engramdb.flows._view_faces_async import AsyncBoundMemory
from engramdb.flows._view_faces_sync import BoundMemory
from engramdb.flows._view_ops import EXPIRES_AT, MAX_RECENT, MAX_TOOL_TOP_K, VIEW_OPS, ViewOp
from engramdb.json_format import hits_to_json, record_to_json
from engramdb.validate import check_int

__all__ = [
    "TOOLS",
    "MemoryTools",
    "Retriever",
    "estimate_tokens",
    "format_context",
    "memory_tools",
    "only_fields",
    "retriever",
    "tool_arguments",
    "tool_error",
]

Result = dict[str, Any]


def _spec(op: ViewOp, session: bool) -> dict[str, Any]:
    """A tool's spec, from its view operation's declaration (:data:`VIEW_OPS`): a view
    without a session offers no ``durability`` but ``shared`` (and does not explain
    ``session``)."""
    assert op.tool is not None
    fields = op.tool_fields()
    properties = {f.name: f.described() for f in fields}
    if "durability" in properties and not session:
        properties["durability"] = {**properties["durability"], "enum": ["shared"]}
        properties["durability"].pop("description")
    return {
        "name": op.tool.name,
        "description": op.tool.description,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": [f.name for f in fields if f.required],
            "additionalProperties": False,
        },
    }


def tool_arguments(arguments: object) -> dict[str, Any]:
    """A call's arguments: a JSON object (text, as models send it) or a mapping."""
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ValidationError(f"the arguments are not valid JSON ({exc.msg})") from None
        except ValueError:
            raise ValidationError("the arguments are not valid JSON text") from None
    if not isinstance(arguments, Mapping):
        raise ValidationError(f"the arguments {shown(arguments)} must be a JSON object")
    return dict(arguments)


def only_fields(name: str, arguments: dict[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    known = spec["parameters"]["properties"]
    unknown = sorted(set(arguments) - set(known))
    if unknown:
        raise ValidationError(
            f"{name} does not take {', '.join(map(repr, unknown))}; its arguments are "
            f"{sorted(known)}"
        )
    missing = [key for key in spec["parameters"]["required"] if key not in arguments]
    if missing:
        raise ValidationError(f"{name} needs {', '.join(map(repr, missing))}")
    return arguments


def _unknown(memory_id: object) -> NotFoundError:
    return NotFoundError(
        f"there is no memory {shown(memory_id)} in this scope; use an id that recall or "
        "list_recent returned"
    )


# -- the tools: name -> spec -> the view's method -> the JSON answer ------------------------

View = Any  # a BoundMemory, or an AsyncBoundMemory whose methods answer awaitables


def _remember(view: View, args: dict[str, Any]) -> Any:
    return view.remember(
        args["text"],
        durability=args.get("durability", "shared"),
        labels=args.get("labels"),
        importance=args.get("importance", 0.5),
        ttl=args.get("ttl_seconds"),
        expires_at=EXPIRES_AT.decoded(args.get("expires_at")),
    )


def _remembered(view: View, args: dict[str, Any], record: Remembered) -> Result:
    durability = args.get("durability", "shared")
    return {"id": record.id, "durability": durability, "dropped": record.dropped}


def _recall(view: View, args: dict[str, Any]) -> Any:
    top_k = check_int("top_k", args.get("top_k", 5), 1, MAX_TOOL_TOP_K)
    context = args.get("context", 0)
    return view.recall(args["query"], top_k=top_k, labels=args.get("labels"), context=context)


def _recalled(view: View, args: dict[str, Any], hits: Hits) -> Result:
    """The body of ``POST /v1/recall`` (``hits_to_json``) and the space searched."""
    return hits_to_json(hits) | {"space": view.space}


def _turns_saved(view: View, args: dict[str, Any], records: list[MemoryRecord]) -> Result:
    """The ids of the conversation's turns, in turn order (a model sees ids, not records)."""
    return {"conversation": args["conversation"], "ids": [record.id for record in records]}


def _forgotten(view: View, args: dict[str, Any], done: bool) -> Result:
    if not done:
        raise _unknown(args["id"])
    return {"forgotten": True, "id": args["id"]}


def _valued(view: View, args: dict[str, Any], record: MemoryRecord | None) -> Result:
    if record is None:
        raise _unknown(args["memory_id"])
    manual = record.utility.manual if record.utility is not None else args["value"]
    return {"id": record.id, "value": manual}


def _completed(view: View, args: dict[str, Any], done: bool) -> Result:
    if not done:
        raise ValidationError(
            f"selection_id {shown(args['selection_id'])} is unknown, expired or already "
            "completed; each recall's selection_id accepts one score"
        )
    return {"completed": True, "selection_id": args["selection_id"]}


def _document(view: View, args: dict[str, Any]) -> Any:
    return view.remember_document(args["text"], source=args["source"], labels=args.get("labels"))


def _documented(view: View, args: dict[str, Any], document: Document) -> Result:
    """The document's id and its chunks' ids (not their texts: the model sent them)."""
    chunks = [record.id for record in document.chunks]
    return {
        "document_id": document.id,
        "source": document.source,
        "added": document.added,
        "chunk_ids": chunks,
    }


def _list_recent(view: View, args: dict[str, Any]) -> Any:
    return view.list(check_int("limit", args.get("limit", 10), 1, MAX_RECENT))


def _listed(view: View, args: dict[str, Any], records: list[MemoryRecord]) -> Result:
    return {
        "memories": [
            record_to_json(record)
            | {"durability": "shared" if record.scope == view.scope else "session"}
            for record in records
        ]
    }


def _call(op: ViewOp) -> Callable[[View, dict[str, Any]], Any]:
    """The view's method of ``op``, with the arguments decoded as its fields say."""

    def call(view: View, args: dict[str, Any]) -> Any:
        fields = {f.name: f for f in op.tool_fields()}
        decoded = {name: fields[name].decoded(value) for name, value in args.items()}
        return getattr(view, op.name)(**decoded)

    return call


def _answer(op: ViewOp) -> Callable[[View, dict[str, Any], Any], Result]:
    def shape(view: View, args: dict[str, Any], result: Any) -> Result:
        assert op.answer is not None
        if op.has_absent and result is op.absent:
            raise _unknown(next(iter(args.values()), None))
        answer: Result = op.answer(result, args)
        return answer

    return shape


@dataclass(frozen=True, slots=True)
class _Tool:
    op: ViewOp  # the declaration: the spec's name, description and parameters
    call: Callable[[View, dict[str, Any]], Any]  # the view's method on the arguments
    shape: Callable[[View, dict[str, Any], Any], Result]  # its answer as JSON


# How a tool calls the view, and shapes its answer, where that is not the view
# operation's own method and JSON answer (a model sees ids, not whole records).
_CALLS: dict[str, tuple[Callable[[View, dict[str, Any]], Any], Callable[..., Result]]] = {
    "remember": (_remember, _remembered),
    "recall": (_recall, _recalled),
    "forget": (lambda view, a: view.forget(a["id"]), _forgotten),
    "feedback": (lambda view, a: view.feedback(a["memory_id"], a["value"]), _valued),
    "complete": (lambda view, a: view.complete(a["selection_id"], a["score"]), _completed),
    "list": (_list_recent, _listed),
    "remember_document": (_document, _documented),
    "remember_conversation": (_call(VIEW_OPS["remember_conversation"]), _turns_saved),
}

_TABLE: dict[str, _Tool] = {
    op.tool.name: _Tool(op, *_CALLS.get(op.name, (_call(op), _answer(op))))
    for op in VIEW_OPS.values()
    if op.tool is not None
}
"""Every tool, by its name: each view operation's that declares one."""

TOOLS = tuple(_TABLE)
"""The names of every tool :func:`memory_tools` can offer."""


class MemoryTools:
    """Tool specs (``.specs``, the OpenAI function-calling shape) and ``.dispatch(name,
    arguments)`` for a bound view; see :func:`memory_tools`."""

    def __init__(self, bound: BoundMemory | AsyncBoundMemory, names: Iterable[str]) -> None:
        if not isinstance(bound, BoundMemory | AsyncBoundMemory):
            raise ValidationError(
                f"memory_tools() takes a bound view, memory.bind(scope, ...), not {shown(bound)}"
            )
        self.bound = bound
        chosen = list(dict.fromkeys(names))
        wrong = [name for name in chosen if name not in _TABLE]
        if wrong or not chosen:
            raise ValidationError(f"tools={chosen!r}: choose from {list(_TABLE)}")
        session = bound.session is not None
        self._specs = {name: _spec(_TABLE[name].op, session) for name in chosen}

    @property
    def specs(self) -> list[dict[str, Any]]:
        """``[{"type": "function", "function": {"name", "description", "parameters"}}]``."""
        return [{"type": "function", "function": dict(spec)} for spec in self._specs.values()]

    @property
    def names(self) -> list[str]:
        return list(self._specs)

    def dispatch(self, name: str, arguments: object) -> Result | Awaitable[Result]:
        """Run tool ``name`` with ``arguments`` (a JSON string or a dict) and return a
        JSON-ready dict: the result, or ``{"error": "..."}``. For an async view, await
        the answer."""
        if isinstance(self.bound, AsyncBoundMemory):
            return self._adispatch(name, arguments)
        try:
            return self._run(name, arguments)
        except Exception as exc:
            return self.error(exc)

    def run(self, name: str, arguments: object) -> Result | Awaitable[Result]:
        """:meth:`dispatch` without the catching: the JSON-ready result, or the error
        (an :class:`~engramdb.EngramError` naming the mistake, or what failed) raised;
        for an async view, raised when the answer is awaited. For a transport that
        reports failures its own way (the MCP server); shape them with :meth:`error`."""
        if isinstance(self.bound, AsyncBoundMemory):
            return self._arun(name, arguments)
        return self._run(name, arguments)

    @staticmethod
    def error(exc: BaseException) -> Result:
        """``{"error": message}`` for a failed call: engramdb's own message, or the
        exception's type only (so no message can carry a credential)."""
        if isinstance(exc, EngramError):
            return {"error": str(exc)}
        return {"error": f"the memory tool failed ({type(exc).__name__}); try again later"}

    def _checked(self, name: str, arguments: object) -> tuple[_Tool, dict[str, Any]]:
        spec = self._specs.get(name) if isinstance(name, str) else None
        if spec is None:
            raise ValidationError(f"there is no memory tool {shown(name)}; use one of {self.names}")
        return _TABLE[name], only_fields(name, tool_arguments(arguments), spec)

    def _run(self, name: str, arguments: object) -> Result:
        tool, args = self._checked(name, arguments)
        return tool.shape(self.bound, args, tool.call(self.bound, args))

    async def _arun(self, name: str, arguments: object) -> Result:
        tool, args = self._checked(name, arguments)
        return tool.shape(self.bound, args, await tool.call(self.bound, args))

    async def _adispatch(self, name: str, arguments: object) -> Result:
        try:
            return await self._arun(name, arguments)
        except Exception as exc:
            return self.error(exc)


def memory_tools(
    bound: BoundMemory | AsyncBoundMemory,
    *,
    tools: Iterable[str] = ("remember", "recall", "forget"),
) -> MemoryTools:
    """Tools for a model over ``bound`` (a view from ``memory.bind(...)``): ``.specs`` to
    send with the request, ``.dispatch(name, arguments)`` to run a tool call. ``tools``
    chooses among :data:`TOOLS`: ``remember``, ``recall``, ``forget`` (the default) and
    the other tools the view operations declare (``feedback``, ``complete``,
    ``list_recent``, ``status``...)."""
    return MemoryTools(bound, tools)


class Retriever:
    """``retrieve(query, **options)``: the hits of ``bound.recall`` with defaults."""

    def __init__(self, bound: BoundMemory | AsyncBoundMemory, defaults: Mapping[str, Any]):
        if not isinstance(bound, BoundMemory | AsyncBoundMemory):
            raise ValidationError(
                f"retriever() takes a bound view, memory.bind(scope, ...), not {shown(bound)}"
            )
        self.bound = bound
        self.defaults = dict(defaults)

    def retrieve(self, query: str, **options: Any) -> Hits | Awaitable[Hits]:
        """Recall ``query`` (call options override the defaults); await it for an async
        view."""
        return self.bound.recall(query, **{**self.defaults, **options})

    __call__ = retrieve


def retriever(bound: BoundMemory | AsyncBoundMemory, **defaults: Any) -> Retriever:
    """A narrow retriever over ``bound`` for RAG call sites (``top_k=3``, ``labels=``...)."""
    return Retriever(bound, defaults)


def estimate_tokens(text: str) -> int:
    """How many tokens ``text`` is, estimated: its WordPiece tokens (BERT's uncased
    tokenizer over the vocabulary of the static table that ships with engramdb, the
    static embedder's own). An estimate of what a model's tokenizer counts (for OpenAI's
    cl100k_base, see ``docs/agents.md``, "A budget in tokens"); for an exact count pass
    ``count_tokens=`` to :func:`format_context`. The vocabulary is loaded on the first
    call, never at import."""
    if not isinstance(text, str):
        raise ValidationError(f"estimate_tokens() counts a text (a str), not {shown(text)}")
    return len(_wordpiece().ids(text))


@functools.cache
def _wordpiece() -> WordPieceTokenizer:
    from engramdb._embedders.shipped_vocabulary import TOKENS  # 220 kB: on first use only

    return WordPieceTokenizer(TOKENS.split("\n"))


def format_context(
    hits: Sequence[Hit],
    *,
    budget_chars: int | None = None,
    budget_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
    header: str = "Relevant memories (cite by [id]):",
) -> str:
    """A memory block for a prompt: ``header``, then one ``- [id] text`` line per hit,
    best score first, never longer than its budget (a line that does not fit whole is
    cut with "…" when it is the first, and ends the block otherwise). No hits, or a
    budget too small for the header and one character of memory: ``""``.

    The budget is ``budget_chars`` characters (2000 when no budget is given) or
    ``budget_tokens`` tokens, counted by ``count_tokens`` (a function from a text to its
    number of tokens, such as ``engramdb.providers.tiktoken_counter()``) or else estimated
    by :func:`estimate_tokens`. Each candidate block is counted whole, so a count need not
    add up line by line (a BPE's does not)."""
    budget, measure = _budget(budget_chars, budget_tokens, count_tokens)
    ranked = sorted(hits, key=lambda hit: -hit.score)  # stable: ties keep their order
    leads = [f"- [{hit.memory.id}] " for hit in ranked]
    texts = [" ".join(hit.memory.text.split()) for hit in ranked]
    lines = [lead + text for lead, text in zip(leads, texts, strict=True)]

    def block(kept: list[str]) -> str:
        return "\n".join([header, *kept])

    whole = _longest(lambda k: measure(block(lines[:k])) <= budget, len(lines) + 1)
    if whole:
        return block(lines[:whole])
    if not lines:
        return ""
    lead, text = leads[0], texts[0]
    cut = _longest(lambda k: measure(block([f"{lead}{text[:k]}…"])) <= budget, len(text))
    return block([f"{lead}{text[:cut]}…"]) if cut else ""


def _budget(chars: object, tokens: object, count: object) -> tuple[int, Callable[[str], int]]:
    """The budget and what measures a block against it, from :func:`format_context`'s
    arguments, or the :class:`ValidationError` that names the wrong one."""
    if chars is not None and tokens is not None:
        raise ValidationError(
            f"budget_chars={shown(chars)} and budget_tokens={shown(tokens)}: give one budget"
        )
    if count is not None and tokens is None:
        raise ValidationError(
            f"count_tokens={shown(count)} counts the tokens of budget_tokens=, which is "
            "not given; give budget_tokens= too"
        )
    name, budget = ("budget_chars", chars) if tokens is None else ("budget_tokens", tokens)
    if budget is None:
        return 2000, len
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValidationError(f"{name}={shown(budget)} must be a positive int")
    if tokens is None:
        return budget, len
    if count is None:
        return budget, estimate_tokens
    if not callable(count):
        raise ValidationError(
            f"count_tokens={shown(count)} must be a function from a text to its number of "
            "tokens, such as engramdb.providers.tiktoken_counter()"
        )
    return budget, _checked_count(count)


def _checked_count(count: Callable[[str], Any]) -> Callable[[str], int]:
    def measure(text: str) -> int:
        n = count(text)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValidationError(
                f"count_tokens returned {shown(n)} for a text of {len(text)} characters; "
                "it must return the text's number of tokens, an int >= 0"
            )
        return n

    return measure


def _longest(fits: Callable[[int], bool], end: int) -> int:
    """The largest ``k`` in ``1 .. end - 1`` that ``fits``, found by binary search, or 0
    when it finds none. It returns only a ``k`` it saw fit, so a budget holds even for a
    count that does not always grow with the text (a BPE's may not)."""
    kept, over = 0, end
    while over - kept > 1:
        middle = (kept + over) // 2
        if fits(middle):
            kept = middle
        else:
            over = middle
    return kept


tool_error = MemoryTools.error
