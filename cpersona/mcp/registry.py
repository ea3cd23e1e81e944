"""Tool registration shared by every tool group: the MCP tool annotations we use, and
`add_tools`, which registers plain functions with their docstring (dedented) as the tool
description and one JSON text block as the result."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

READ = ToolAnnotations(read_only_hint=True)
#: Writes a new row or state; repeating the call changes nothing more (dedup, upsert of the same text).
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
#: Appends a new row on every call (archive_episode).
APPEND = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
#: Replaces stored text (update_memory, update_profile): the old content is gone.
OVERWRITE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)
#: Deletes rows.
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)
#: Recomputes tuning state from the corpus (random samples: not idempotent).
CALIBRATE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)


def add_tools(app: MCPServer, tools: Iterable[tuple[Callable[..., str], ToolAnnotations]]) -> None:
    """Register each (function, annotations) pair; the function's name is the tool name."""
    for fn, notes in tools:
        app.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=notes, structured_output=False)
