"""Memory as tools for agents, and the helpers a tool host (the MCP server) shares.

:func:`memory_tools` (tool specs and a dispatcher over a bound view), :func:`retriever`
and :func:`format_context` are also exported from ``engramdb``. A host that serves the
tools over its own transport checks a call the way :class:`MemoryTools` does:

* :func:`tool_arguments`: a call's arguments, JSON text or a mapping, as a dict;
* :func:`only_fields`: refuse arguments a tool's spec does not declare, or a missing
  required one;
* :func:`tool_error`: an exception as the tool result a model sees (an ``EngramError``
  says what was wrong; anything else is a generic failure that leaks no detail).

Public and stable (``docs/stores.md``, "The driver kit"). Standard library only.
"""

from ._flows.agents import MemoryTools, Retriever, format_context, memory_tools, retriever
from ._flows.agents import _arguments as tool_arguments
from ._flows.agents import _only as only_fields

tool_error = MemoryTools.error

__all__ = [
    "MemoryTools",
    "Retriever",
    "format_context",
    "memory_tools",
    "only_fields",
    "retriever",
    "tool_arguments",
    "tool_error",
]
