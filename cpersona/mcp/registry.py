"""Tool registration shared by every tool group: the MCP tool annotations we use,
`add_tools` (plain functions → tools, the docstring as description, one JSON text block as
the result), and `compact_schema`, the form in which input schemas are published.

Published schemas are self-contained and small: `$ref`s are inlined (several hosts and
function-calling converters do not resolve references), pydantic's `title`s are dropped
(the property name says the same), an optional argument's `null` alternative is dropped
(omitting it is how a client says "none": `anyOf: [T, null]` is published as `T`), and so
are the defaults that say nothing (`""`, `[]`, `null`, `false`) and
`additionalProperties: true` (the JSON Schema default); an `anyOf` of plain types becomes a
type list. Descriptions are one line.
Arguments of `UNPUBLISHED` are accepted and validated by the tool's argument model but
left out of the published schema: clients written for the original send them unasked
(`session_key`), and every conversation would otherwise pay for them on 16 tools.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

# Only hints that differ from the MCP defaults are sent (readOnlyHint false,
# destructiveHint true, idempotentHint false): every conversation pays for the tools list.
READ = ToolAnnotations(read_only_hint=True)
#: Writes a new row or state; repeating the call changes nothing more (dedup, upsert of the same text).
WRITE = ToolAnnotations(destructive_hint=False, idempotent_hint=True)
#: Appends a new row on every call (archive_episode).
APPEND = ToolAnnotations(destructive_hint=False)
#: Replaces stored text (update_memory, update_profile): the old content is gone.
OVERWRITE = ToolAnnotations(idempotent_hint=True)
#: Deletes rows.
DELETE = ToolAnnotations(idempotent_hint=True)
#: Recomputes tuning state from the corpus (random samples: not idempotent).
CALIBRATE = ToolAnnotations(destructive_hint=False)

_DROPPED = frozenset({"title", "$defs", "definitions"})
#: Accepted, validated, not published (see the module doc): `session_key`, and `message`,
#: the 2.5 line's form of store's fields (its clients send it unasked; new clients use the
#: flat fields).
UNPUBLISHED = frozenset({"session_key", "message"})
#: JSON Schema types an `anyOf` of plain types is folded into (`{"type": [..]}`).
_PLAIN_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array"})
_NULL = {"type": "null"}
#: Defaults that tell a client nothing an omitted argument would not (a numeric 0 is the
#: "use the server's default" of the calibration arguments).
_EMPTY_DEFAULTS: tuple[Any, ...] = ("", [], None, False, 0, 0.0)


def add_tools(app: MCPServer, tools: Iterable[tuple[Callable[..., str], ToolAnnotations]]) -> None:
    """Register each (function, annotations) pair; the function's name is the tool name and
    its docstring (dedented) the description."""
    for fn, notes in tools:
        description = " ".join(inspect.cleandoc(fn.__doc__ or "").split())
        hints = notes if notes.model_dump(exclude_none=True) else None  # nothing to say: no annotations key
        app.add_tool(fn, description=description, annotations=hints, structured_output=False)


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as published (module doc): references inlined from its `$defs`, no titles,
    `anyOf: [T, {type: null}]` → `T`. Raises ValueError for a reference it cannot resolve
    (a recursive model: a tool argument must not be one)."""
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    out = _compact(schema, defs, ())
    props = out.get("properties")
    if isinstance(props, dict) and UNPUBLISHED & props.keys():
        out["properties"] = {k: v for k, v in props.items() if k not in UNPUBLISHED}
        if "required" in out:
            out["required"] = [r for r in out["required"] if r not in UNPUBLISHED]
    return out


def _compact(node: Any, defs: dict[str, Any], seen: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_compact(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name not in defs or name in seen:
            raise ValueError(f"cannot inline schema reference {node['$ref']!r}")
        merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
        return _compact(merged, defs, (*seen, name))
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED and not (key == "title" and isinstance(value, dict)):
            continue
        if (key == "default" and any(value == e and type(value) is type(e) for e in _EMPTY_DEFAULTS)) or (
                key == "additionalProperties" and value is True):
            continue
        out[key] = _compact(value, defs, seen)
    options = out.get("anyOf")
    if isinstance(options, list) and _NULL in options:
        kept = [o for o in options if o != _NULL]
        del out["anyOf"]
        out = {**kept[0], **out} if len(kept) == 1 else {"anyOf": kept, **out}
    options = out.get("anyOf")
    if isinstance(options, list) and all(set(o) == {"type"} and o["type"] in _PLAIN_TYPES for o in options):
        del out["anyOf"]  # [{type: integer}, {type: string}] → {type: [integer, string]}
        out = {"type": [o["type"] for o in options], **out}
    return out
