"""An MCP server over stdio: memory tools for a model, bound to the scope the operator chose.

Run ``python -m engramdb.mcp_server --db memory.db --scope acme/user/sam`` (or ``engramdb
mcp ...``) from an MCP client's configuration; the options fall back to ``ENGRAMDB_DB``,
``ENGRAMDB_EMBEDDER``, ``ENGRAMDB_SCOPE`` and ``ENGRAMDB_SESSION``, then to the config
file (``--config``, ``ENGRAMDB_CONFIG``, ``~/.config/engramdb/config.toml``:
``engramdb.settings``).
The server acts through one bound view, ``memory.bind(scope, session=session)``: no tool
takes a scope, a namespace or a session, and an argument a tool does not know is refused.
Its memory owns a ``Maintainer`` in a thread (``engramdb.background.in_thread``): pending
texts are embedded and expired memories purged while it serves, and it stops before the
database closes; ``--no-maintain`` (or ``ENGRAMDB_MAINTAIN=off``) turns it off. The
``engramdb://status`` resource shows its state.

:class:`MemoryServer` holds the tools and runs them without the ``mcp`` package: they
are the agent tools, ``engramdb.memory_tools`` (specs, validation, answers), and the
server only carries them; :func:`main` serves them with the official MCP SDK (extra
``mcp``). See ``docs/mcp.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from engramdb import (
    EngramError,
    Maintenance,
    Memory,
    MemoryTools,
    __version__,
    agents,
    memory_tools,
)
from engramdb.background import in_thread
from engramdb.json_format import dumps
from engramdb.settings import Settings, resolve

__all__ = [
    "MCP_HINT",
    "STATUS_URI",
    "TOOLS",
    "MemoryServer",
    "ToolFailure",
    "argument_parser",
    "build_server",
    "main",
]

MCP_HINT = "pip install 'engramdb[mcp]'"
STATUS_URI = "engramdb://status"
_RESOURCE_NOT_FOUND = -32002  # the MCP specification's error code

TOOLS = agents.TOOLS
"""The tools the server offers: every tool of :func:`engramdb.memory_tools` (each view
operation's that declares one: ``engramdb.flows.VIEW_OPS``)."""


class ToolFailure(Exception):
    """A tool call failed; ``str(exc)`` is the one-line message for the model (never a
    credential: an unexpected exception is named by its type only)."""


class MemoryServer:
    """The MCP server's tools over ``memory.bind(scope, session=session)``: a transport
    over :func:`engramdb.memory_tools` (its specs, validation and answers).

    ``specs`` lists ``{"name", "description", "parameters"}`` (closed JSON schemas);
    ``call(name, arguments)`` answers a JSON-ready dict or raises :class:`ToolFailure`;
    ``status()`` is what the ``engramdb://status`` resource shows.
    """

    def __init__(self, memory: Memory, scope: Sequence[str], session: str | None = None):
        self.memory = memory
        self.view = memory.bind(tuple(scope), session=session)
        self.tools = memory_tools(self.view, tools=TOOLS)

    @property
    def specs(self) -> list[Mapping[str, Any]]:
        return [spec["function"] for spec in self.tools.specs]

    def call(self, name: str, arguments: object) -> dict[str, Any]:
        """Run tool ``name``; a wrong name or argument, an unknown id or a failure is a
        :class:`ToolFailure` naming the problem, and changes nothing."""
        try:
            answer = self.tools.run(name, {} if arguments is None else arguments)
        except Exception as exc:
            raise ToolFailure(MemoryTools.error(exc)["error"]) from exc
        assert isinstance(answer, dict)  # a sync view answers at once
        return answer

    def status(self) -> dict[str, Any]:
        """The status tool's answer (``engramdb.flows.status_to_json``): the bound scope
        and session, how many memories they hold, the active space and the schema
        version (nothing about other scopes), and ``maintenance``: the memory's own
        maintainer's state (None without one; without the store-wide counts of its last
        pass)."""
        return self.call("status", {})


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
            content=[types.TextContent(text=dumps(answer))], structured_content=answer
        )

    async def list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=STATUS_URI,
                    name="status",
                    description="The bound scope's memory count, active space and schema version",
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
                    uri=STATUS_URI, mime_type="application/json", text=dumps(tools.status())
                )
            ]
        )

    return Server(
        "engramdb",
        version=__version__,
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


def argument_parser(
    prog: str = "python -m engramdb.mcp_server", *, add_help: bool = True
) -> argparse.ArgumentParser:
    """The server's options: :func:`main` parses them, and ``engramdb mcp`` shows and
    takes them (``add_help=False``: as the parent of its parser)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Serve engramdb memory tools to an MCP client over stdio, bound to one scope.",
        add_help=add_help,
    )
    parser.add_argument("--db", help="SQLite file (env ENGRAMDB_DB; default ./engramdb.sqlite3)")
    parser.add_argument(
        "--embedder", help="embedder URL, e.g. openai:text-embedding-3-small (default static:)"
    )
    parser.add_argument("--scope", help="the scope, like acme/user/sam (env ENGRAMDB_SCOPE)")
    parser.add_argument("--session", help="a session id for session memories (ENGRAMDB_SESSION)")
    parser.add_argument(
        "--config", metavar="FILE", help="the config file (ENGRAMDB_CONFIG; docs/cli.md)"
    )
    parser.add_argument(
        "--no-maintain",
        action="store_true",
        help="run no background maintenance (default: on, unless ENGRAMDB_MAINTAIN=off)",
    )
    return parser


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m engramdb.mcp_server") -> int:
    """Serve until the client closes stdin; 0 then, 1 when it cannot start (the reason,
    one line, on stderr: stdout belongs to the protocol)."""
    args = argument_parser(prog).parse_args(argv)
    try:
        _load_mcp()
        settings: Settings = resolve(
            db=args.db,
            embedder=args.embedder,
            scope=args.scope,
            session=args.session,
            config=args.config,
        )
        on = settings.maintain and not args.no_maintain
        memory = settings.open(maintain=Maintenance(runner=in_thread) if on else False)
    except (ImportError, EngramError) as exc:
        print(f"{prog}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    with memory:
        tools = MemoryServer(memory, settings.scope, settings.session)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends a manual run quietly
            asyncio.run(_serve(tools))
    return 0


if __name__ == "__main__":
    sys.exit(main())
