"""Tool registration shared by every tool group: the MCP tool annotations we use, and
`add_tools`, which registers plain functions with their docstring (dedented) as the tool
description and one JSON text block as the result."""

from __future__ import annotations

import inspect
from typing import Callable, Iterable

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

READ = ToolAnnotations(readOnlyHint=True)
#: Writes a new row or state; repeating the call changes nothing more (dedup, upsert of the same text).
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True)
#: Appends a new row on every call (archive_episode).
APPEND = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False)
#: Replaces stored text (update_memory, update_profile): the old content is gone.
OVERWRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True)
#: Deletes rows.
DELETE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True)
#: Recomputes tuning state from the corpus (random samples: not idempotent).
CALIBRATE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False)


def add_tools(app: MCPServer, tools: Iterable[tuple[Callable[..., str], ToolAnnotations]]) -> None:
    """Register each (function, annotations) pair; the function's name is the tool name."""
    for fn, notes in tools:
        app.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=notes, structured_output=False)
