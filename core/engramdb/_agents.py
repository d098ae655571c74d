"""What an agent loop needs: tool specs and a dispatcher, a retriever, a context block.

Every piece acts through a bound view (``memory.bind(...)``), so the scope is the
operator's choice: no tool argument can name one (the specs have no such parameter, and
the dispatcher refuses any argument it does not know). A tool call that fails, whatever
the reason, comes back as ``{"error": ...}``, never as an exception that would end the
agent's loop.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ._bound import AsyncBoundMemory, BoundMemory
from ._errors import EngramError, ValidationError, shown
from ._types import Hit, Hits
from ._validate import check_int
from .json_format import hits_to_json

__all__ = ["MemoryTools", "Retriever", "format_context", "memory_tools", "retriever"]

Result = dict[str, Any]
_Shape = Callable[[Any], Result]
_TOOLS = ("remember", "recall", "forget")
_MAX_TOOL_TOP_K = 20

_LABELS_SCHEMA = {
    "type": "object",
    "description": 'Labels as name -> list of short values, e.g. {"topic": ["deploys"]}',
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
}


def _remember_spec(session: bool) -> dict[str, Any]:
    durability = ["shared", "session"] if session else ["shared"]
    return {
        "name": "remember",
        "description": (
            "Save one durable fact, preference or instruction worth recalling in later "
            "conversations (a short, self-contained sentence). Use it when the user states "
            "something that will matter again; do not save small talk or secrets."
            + (" durability 'session' keeps it for this session only." if session else "")
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The fact, as one sentence."},
                "durability": {"type": "string", "enum": durability, "default": "shared"},
                "labels": _LABELS_SCHEMA,
                "importance": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "How much it matters, 0 to 1 (default 0.5).",
                },
                "ttl_seconds": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "Forget it after this many seconds.",
                },
                "expires_at": {
                    "type": "string",
                    "format": "date-time",
                    "description": "Forget it at this time (ISO 8601 with a timezone).",
                },
            },
            "required": ["text"],
            "additionalProperties": False,
        },
    }


_RECALL_SPEC = {
    "name": "recall",
    "description": (
        "Search long-term memory for facts relevant to the current task before answering "
        "a question about the user, past decisions or preferences. Returns memories with "
        "ids; cite the ids you use."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for, in a few words."},
            "top_k": {"type": "integer", "minimum": 1, "maximum": _MAX_TOOL_TOP_K, "default": 5},
            "labels": _LABELS_SCHEMA,
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}

_FORGET_SPEC = {
    "name": "forget",
    "description": (
        "Delete a memory by id when the user asks to forget it or it is wrong or outdated."
    ),
    "parameters": {
        "type": "object",
        "properties": {"id": {"type": "string", "description": "The memory's id."}},
        "required": ["id"],
        "additionalProperties": False,
    },
}


def _arguments(arguments: object) -> dict[str, Any]:
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


def _only(name: str, arguments: dict[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
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


def _time(value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            moment = None
        if moment is not None and moment.tzinfo is not None:
            return moment
    raise ValidationError(
        f"expires_at={shown(value)} must be an ISO 8601 time with a timezone, "
        "e.g. '2026-12-31T18:00:00+00:00'"
    )


def _error(exc: BaseException) -> Result:
    if isinstance(exc, EngramError):
        return {"error": str(exc)}
    return {"error": f"the memory tool failed ({type(exc).__name__}); try again later"}


class MemoryTools:
    """Tool specs (``.specs``, the OpenAI function-calling shape) and ``.dispatch(name,
    arguments)`` for a bound view; see :func:`memory_tools`."""

    def __init__(self, bound: BoundMemory | AsyncBoundMemory, names: Iterable[str]) -> None:
        if not isinstance(bound, BoundMemory | AsyncBoundMemory):
            raise ValidationError(
                f"memory_tools() takes a bound view, memory.bind(scope, ...), not {shown(bound)}"
            )
        self.bound = bound
        specs = {
            "remember": _remember_spec(bound.session is not None),
            "recall": _RECALL_SPEC,
            "forget": _FORGET_SPEC,
        }
        chosen = list(dict.fromkeys(names))
        wrong = [name for name in chosen if name not in specs]
        if wrong or not chosen:
            raise ValidationError(f"tools={chosen!r}: choose from {sorted(specs)}")
        self._specs = {name: specs[name] for name in chosen}

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
        try:
            call, shape = self._call(name, arguments)
            answer = call()
        except Exception as exc:
            return _error(exc) if isinstance(self.bound, BoundMemory) else _ready(_error(exc))
        if inspect.isawaitable(answer):
            return _shaped(answer, shape)
        return shape(answer)

    def _call(
        self, name: str, arguments: object
    ) -> tuple[Callable[[], Any], Callable[[Any], Result]]:
        spec = self._specs.get(name) if isinstance(name, str) else None
        if spec is None:
            raise ValidationError(f"there is no memory tool {shown(name)}; use one of {self.names}")
        args = _only(name, _arguments(arguments), spec)
        bound: Any = self.bound
        if name == "remember":
            durability = args.get("durability", "shared")

            def remember() -> Any:
                return bound.remember(
                    args["text"],
                    durability=durability,
                    labels=args.get("labels"),
                    importance=args.get("importance", 0.5),
                    ttl=args.get("ttl_seconds"),
                    expires_at=_time(args.get("expires_at")),
                )

            return remember, lambda record: {
                "id": record.id,
                "durability": durability,
                "dropped": record.dropped,
            }
        if name == "recall":
            top_k = check_int("top_k", args.get("top_k", 5), 1, _MAX_TOOL_TOP_K)
            return (
                lambda: bound.recall(args["query"], top_k=top_k, labels=args.get("labels")),
                hits_to_json,
            )
        return lambda: bound.forget(args["id"]), lambda done: {"forgotten": bool(done)}


async def _ready(result: Result) -> Result:
    return result


async def _shaped(answer: Awaitable[Any], shape: Callable[[Any], Result]) -> Result:
    try:
        return shape(await answer)
    except Exception as exc:
        return _error(exc)


def memory_tools(
    bound: BoundMemory | AsyncBoundMemory,
    *,
    tools: Iterable[str] = ("remember", "recall", "forget"),
) -> MemoryTools:
    """Tools for a model over ``bound`` (a view from ``memory.bind(...)``): ``.specs`` to
    send with the request, ``.dispatch(name, arguments)`` to run a tool call."""
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


def format_context(
    hits: Sequence[Hit],
    *,
    budget_chars: int = 2000,
    header: str = "Relevant memories (cite by [id]):",
) -> str:
    """A memory block for a prompt: ``header``, then one ``- [id] text`` line per hit,
    best score first, never longer than ``budget_chars`` (a line that does not fit whole
    is cut with "…" when it is the first, and ends the block otherwise). No hits, or a
    budget too small for the header and one character of memory: ``""``."""
    if isinstance(budget_chars, bool) or not isinstance(budget_chars, int) or budget_chars < 1:
        raise ValidationError(f"budget_chars={shown(budget_chars)} must be a positive int")
    lines = [header]
    used = len(header)
    ranked = sorted(range(len(hits)), key=lambda i: (-hits[i].score, i))
    for position in ranked:
        record = hits[position].memory
        line = f"- [{record.id}] {' '.join(record.text.split())}"
        if used + 1 + len(line) <= budget_chars:
            lines.append(line)
            used += 1 + len(line)
            continue
        room = budget_chars - used - 1
        if len(lines) == 1 and room > len(f"- [{record.id}] ") + 1:
            lines.append(line[: room - 1] + "…")
        break
    return "\n".join(lines) if len(lines) > 1 else ""
