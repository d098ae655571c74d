"""An MCP server over stdio: memory tools for a model, bound to the scope the operator chose.

Run ``python -m engramdb.mcp_server --db memory.db --scope acme/user/sam`` (or ``engramdb
mcp ...``) from an MCP client's configuration; the options fall back to ``ENGRAMDB_DB``,
``ENGRAMDB_EMBEDDER``, ``ENGRAMDB_SCOPE`` and ``ENGRAMDB_SESSION`` (``engramdb.settings``).
The server acts through one bound view, ``memory.bind(scope, session=session)``: no tool
takes a scope, a namespace or a session, and an argument a tool does not know is refused.

:class:`MemoryServer` holds the tools and runs them without the ``mcp`` package (the
validation is the agent tools' own, ``engramdb.memory_tools``); :func:`main` serves them
with the official MCP SDK (extra ``mcp``). See ``docs/mcp.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from engramdb import EngramError, Memory, NotFoundError, ValidationError, memory_tools
from engramdb.agents import only_fields as _only
from engramdb.agents import tool_arguments as _arguments
from engramdb.agents import tool_error as _error
from engramdb.settings import Settings, format_scope, resolve
from engramdb.validate import check_int, shown

__all__ = ["MCP_HINT", "STATUS_URI", "MemoryServer", "ToolFailure", "build_server", "main"]

MCP_HINT = "pip install 'engramdb[mcp]'"
STATUS_URI = "engramdb://status"
_MAX_RECENT = 50
_RESOURCE_NOT_FOUND = -32002  # the MCP specification's error code

_FEEDBACK_SPEC = {
    "name": "feedback",
    "description": (
        "Mark one memory as helpful (value up to 1) or misleading (down to -1) when the user "
        "confirms or corrects it; null clears the mark. Use the id recall or list_recent "
        "returned."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "memory_id": {"type": "string", "description": "The memory's id."},
            "value": {
                "type": ["number", "null"],
                "minimum": -1,
                "maximum": 1,
                "description": "-1 (misleading) to 1 (helpful), or null to clear.",
            },
        },
        "required": ["memory_id", "value"],
        "additionalProperties": False,
    },
}

_COMPLETE_SPEC = {
    "name": "complete",
    "description": (
        "After finishing the task a recall served, say once how much its memories helped: "
        "score 1 (they answered it) to -1 (they misled you). Pass the selection_id that "
        "recall returned; each selection accepts one score."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "selection_id": {"type": "string", "description": "recall's selection_id."},
            "score": {"type": "number", "minimum": -1, "maximum": 1},
        },
        "required": ["selection_id", "score"],
        "additionalProperties": False,
    },
}

_LIST_RECENT_SPEC = {
    "name": "list_recent",
    "description": (
        "List the newest memories saved here (newest first), e.g. to review what you "
        "remembered in this conversation or to find an id to forget. Use recall to search."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": _MAX_RECENT, "default": 10}
        },
        "required": [],
        "additionalProperties": False,
    },
}

_STATUS_SPEC = {
    "name": "status",
    "description": (
        "Report the memory database's health: memory counts, texts still waiting for an "
        "embedding, the active embedding space and the schema version. Use it when recall "
        "seems to miss things."
    ),
    "parameters": {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    },
}


class ToolFailure(Exception):
    """A tool call failed; ``str(exc)`` is the one-line message for the model (never a
    credential: an unexpected exception is named by its type only)."""


class MemoryServer:
    """The MCP server's tools over ``memory.bind(scope, session=session)``.

    ``specs`` lists ``{"name", "description", "parameters"}`` (closed JSON schemas);
    ``call(name, arguments)`` answers a JSON-ready dict or raises :class:`ToolFailure`;
    ``status()`` is what the ``engramdb://status`` resource shows.
    """

    def __init__(self, memory: Memory, scope: Sequence[str], session: str | None = None):
        self.memory = memory
        self.view = memory.bind(tuple(scope), session=session)
        self._agent = memory_tools(self.view)
        own = (_FEEDBACK_SPEC, _COMPLETE_SPEC, _LIST_RECENT_SPEC, _STATUS_SPEC)
        self._specs: dict[str, Mapping[str, Any]] = {
            spec["function"]["name"]: spec["function"] for spec in self._agent.specs
        } | {str(spec["name"]): spec for spec in own}

    @property
    def specs(self) -> list[Mapping[str, Any]]:
        return list(self._specs.values())

    def call(self, name: str, arguments: object) -> dict[str, Any]:
        """Run tool ``name``; a wrong name or argument, an unknown id or a failure is a
        :class:`ToolFailure` naming the problem, and changes nothing."""
        try:
            spec = self._specs.get(name) if isinstance(name, str) else None
            if spec is None:
                raise ValidationError(
                    f"there is no tool {shown(name)}; use one of {list(self._specs)}"
                )
            args = _only(name, _arguments({} if arguments is None else arguments), spec)
            answer: dict[str, Any] = getattr(self, f"_{name}")(args)
            return answer
        except Exception as exc:
            raise ToolFailure(_error(exc)["error"]) from exc

    def _agent_tool(self, name: str, args: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The agent tool's own validation and answer: (the view's result, its shape)."""
        call, shape = self._agent._call(name, args)
        result = call()
        return result, shape(result)

    def _remember(self, args: dict[str, Any]) -> dict[str, Any]:
        return self._agent_tool("remember", args)[1]

    def _recall(self, args: dict[str, Any]) -> dict[str, Any]:
        hits, answer = self._agent_tool("recall", args)
        answer["meta"] = {
            "mode": hits.mode,
            "status": hits.status,
            "coverage": hits.coverage,
            "space": self._space(),
            "selection_id": hits.selection_id,
        }
        if hits.error is not None:
            answer["meta"]["error"] = hits.error
        return answer

    def _forget(self, args: dict[str, Any]) -> dict[str, Any]:
        if not self._agent_tool("forget", args)[0]:
            raise self._unknown(args["id"])
        return {"forgotten": True, "id": args["id"]}

    def _feedback(self, args: dict[str, Any]) -> dict[str, Any]:
        record = self.view.feedback(args["memory_id"], args["value"])
        if record is None:
            raise self._unknown(args["memory_id"])
        manual = record.utility.manual if record.utility is not None else args["value"]
        return {"id": record.id, "value": manual}

    def _complete(self, args: dict[str, Any]) -> dict[str, Any]:
        if not self.view.complete(args["selection_id"], args["score"]):
            raise ValidationError(
                f"selection_id {shown(args['selection_id'])} is unknown, expired or already "
                "completed; each recall's selection_id accepts one score"
            )
        return {"completed": True, "selection_id": args["selection_id"]}

    def _list_recent(self, args: dict[str, Any]) -> dict[str, Any]:
        limit = check_int("limit", args.get("limit", 10), 1, _MAX_RECENT)
        view = self.view
        records = self.memory.list(view.scope, limit)
        if view.session_scope is not None:
            records += self.memory.list(view.session_scope, limit)
        records.sort(key=lambda record: (record.created_at, record.id), reverse=True)
        return {
            "memories": [
                {
                    "id": record.id,
                    "text": record.text,
                    "labels": record.labels,
                    "durability": "shared" if record.scope == view.scope else "session",
                    "created_at": record.created_at.isoformat(),
                }
                for record in records[:limit]
            ]
        }

    def _status(self, args: dict[str, Any]) -> dict[str, Any]:
        return self.status()

    def status(self) -> dict[str, Any]:
        """The database's counts (all scopes of this file), pending embeddings, active
        space, per-space counts and schema version; and the scope this server is bound to."""
        status = self.memory.status()
        return {
            "scope": format_scope(self.view.scope),
            "session": self.view.session,
            "items": status.items,
            "expired": status.expired,
            "scopes": status.scopes,
            "pending": status.pending,
            "vectors": status.vectors,
            "semantic": status.semantic,
            "active_space": status.active_space,
            "spaces": {space: status.embedded.get(space, 0) for space in status.spaces},
            "schema_version": status.schema_version,
        }

    def _space(self) -> str | None:
        try:
            return str(self.memory.embedder.space.id)
        except EngramError:
            return None

    @staticmethod
    def _unknown(memory_id: object) -> NotFoundError:
        return NotFoundError(
            f"there is no memory {shown(memory_id)} in this server's scope; use an id that "
            "recall or list_recent returned"
        )


def _load_mcp() -> tuple[Any, Any, Any, Any]:
    """``(mcp.types, Server, stdio_server, MCPError)``; a missing ``mcp`` is an
    ``ImportError`` that names the install line."""
    try:  # imported by name: the module imports (and type-checks) without the extra
        types = importlib.import_module("mcp.types")
        lowlevel = importlib.import_module("mcp.server.lowlevel")
        stdio = importlib.import_module("mcp.server.stdio")
        exceptions = importlib.import_module("mcp.shared.exceptions")
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "mcp":
            raise
        raise ImportError(
            f"the MCP server needs the mcp package, which is not installed: {MCP_HINT}"
        ) from exc
    return types, lowlevel.Server, stdio.stdio_server, exceptions.MCPError


def build_server(tools: MemoryServer) -> Any:
    """A low-level ``mcp`` server serving ``tools`` and the ``engramdb://status`` resource."""
    types, Server, _, MCPError = _load_mcp()

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec["name"],
                    description=spec["description"],
                    input_schema=spec["parameters"],
                )
                for spec in tools.specs
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> Any:
        try:
            answer = tools.call(params.name, params.arguments)
        except ToolFailure as exc:
            return types.CallToolResult(content=[types.TextContent(text=str(exc))], is_error=True)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(answer))], structured_content=answer
        )

    async def list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=STATUS_URI,
                    name="status",
                    description="Counts, pending embeddings, spaces and schema of the database",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(ctx: Any, params: Any) -> Any:
        if str(params.uri) != STATUS_URI:
            raise MCPError(
                _RESOURCE_NOT_FOUND, f"there is no resource {str(params.uri)!r}; read {STATUS_URI}"
            )
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=STATUS_URI, mime_type="application/json", text=json.dumps(tools.status())
                )
            ]
        )

    return Server(
        "engramdb",
        instructions=(
            "Long-term memory: recall before answering about the user or past decisions, "
            "remember durable facts they state, forget what they ask you to forget."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


async def _serve(tools: MemoryServer) -> None:
    stdio_server = _load_mcp()[2]
    server = build_server(tools)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Serve engramdb memory tools to an MCP client over stdio, bound to one scope.",
    )
    parser.add_argument("--db", help="SQLite file (env ENGRAMDB_DB; default ./engramdb.sqlite3)")
    parser.add_argument(
        "--embedder", help="embedder URL, e.g. openai:text-embedding-3-small (default static:)"
    )
    parser.add_argument("--scope", help="the scope, like acme/user/sam (env ENGRAMDB_SCOPE)")
    parser.add_argument("--session", help="a session id for session memories (ENGRAMDB_SESSION)")
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m engramdb.mcp_server") -> int:
    """Serve until the client closes stdin; 0 then, 1 when it cannot start (the reason,
    one line, on stderr: stdout belongs to the protocol)."""
    args = _parser(prog).parse_args(argv)
    try:
        _load_mcp()
        settings: Settings = resolve(
            db=args.db, embedder=args.embedder, scope=args.scope, session=args.session
        )
        memory = settings.open()
    except (ImportError, EngramError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    with memory:
        tools = MemoryServer(memory, settings.scope, settings.session)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends a manual run quietly
            asyncio.run(_serve(tools))
    return 0


if __name__ == "__main__":
    sys.exit(main())
