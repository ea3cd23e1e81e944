"""The stdio transport, with a reader that answers every line a client sends.

The SDK's stdio server decodes stdin with `errors="replace"` (invalid UTF-8 silently becomes
U+FFFD and would be stored as such) and drops a line it cannot parse — invalid JSON, a lone
surrogate escape such as half an emoji cut by a JavaScript host, nesting deeper than its
parser's limit (about 200 levels) — after logging it at debug level, so the client waits
forever for an answer. Here stdin is read as bytes and each line is checked first
(`check_line`):

* valid UTF-8 holding a JSON-RPC message the SDK reads → passed on to the SDK unchanged;
* anything else → answered here with one JSON-RPC error, per JSON-RPC 2.0 §5.1
  (https://www.jsonrpc.org/specification#error_object): -32700 Parse error when the line
  is not JSON the server can read, -32600 Invalid Request when it is JSON but not a
  JSON-RPC message. The error carries the request's id when one can be read from the line,
  even a truncated or undecodable one (`read_id`); otherwise id null.

Blank lines are skipped. A rejected line never reaches a tool, so nothing is stored.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from cpersona.mcp.hints import Hint
from cpersona.mcp.pipes import EOF_WAIT_S, InFlight, ThreadedWire, Wire, open_wire

log = logging.getLogger("cpersona.mcp")

RequestId = int | str | None

#: Nesting the SDK's JSON parser accepts (pydantic-core's jiter stops at about 200 levels).
MAX_DEPTH = 200
#: A JSON string literal from its opening quote (an unterminated one runs to the end).
#: Possessive: no backtracking state is kept (a 30 MB unterminated string took ~120 bytes of
#: memory per character with `(?:…)*`).
_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"?', re.S)
#: JSON whitespace.
_WS = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class Rejection:
    """A line answered here: the JSON-RPC error to send back."""

    id: RequestId
    code: int
    message: str

    def answer(self) -> SessionMessage:
        error = types.ErrorData(code=self.code, message=self.message)
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=self.id, error=error))


def check_line(raw: bytes) -> str | Rejection | None:
    """The line to hand to the SDK, the Rejection to answer it with, or None for a blank line."""
    return _check(raw)[0]


def _check(raw: bytes) -> tuple[str | Rejection | None, types.JSONRPCRequest | None]:
    """`check_line`, and the request handed on (None for anything else)."""
    if not raw.strip():
        return None, None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return Rejection(read_id(raw.decode("utf-8", "replace")), types.PARSE_ERROR,
                         f"the request is not valid UTF-8 (byte 0x{raw[err.start]:02x} at offset {err.start}); "
                         "send it encoded as UTF-8. Nothing was done"), None
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as err:
        return _diagnose(text, err), None
    if isinstance(message, types.JSONRPCNotification) and '"id"' in text:
        return _notification_with_id(text), None
    if isinstance(message, types.JSONRPCRequest):
        return text, message
    return text, None


def _diagnose(text: str, err: ValidationError) -> Rejection:
    """Why the SDK could not read `text`, as the error to answer."""
    try:
        value = json.loads(text)
    except RecursionError:
        return Rejection(read_id(text), types.PARSE_ERROR, _too_deep())
    except ValueError as bad:
        return Rejection(read_id(text), types.PARSE_ERROR, f"the request is not valid JSON ({bad}). Nothing was done")
    rid = _valid_id(value.get("id")) if isinstance(value, dict) else None
    first = err.errors(include_url=False)[0]
    if first["type"] != "json_invalid":
        problems = "; ".join(list(dict.fromkeys(f"{'.'.join(map(str, e['loc'][1:])) or 'top level'}: {e['msg']}"
                                                for e in err.errors(include_url=False)))[:4])
        return Rejection(rid, types.INVALID_REQUEST, f"the request is not a JSON-RPC 2.0 message ({problems})")
    if (where := _lone_surrogate(value)) is not None:
        return Rejection(rid, types.PARSE_ERROR,
                         f"the request holds {where}, half of a UTF-16 surrogate pair (e.g. half of an emoji); "
                         "send whole characters. Nothing was done")
    if _depth(value) > MAX_DEPTH:
        return Rejection(rid, types.PARSE_ERROR, _too_deep())
    return Rejection(rid, types.PARSE_ERROR, f"the request is not JSON the server can read ({first['msg']}). "
                                             "Nothing was done")


def _too_deep() -> str:
    return f"the request nests deeper than {MAX_DEPTH} levels; flatten its arguments. Nothing was done"


def _notification_with_id(text: str) -> str | Rejection:
    """A message read as a notification although it has an `id` member (null, a fraction,
    a boolean: none is a valid MCP request id) is a request that would go unanswered."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if not isinstance(value, dict) or "id" not in value:
        return text
    return Rejection(None, types.INVALID_REQUEST,
                     f"the request id must be a string or an integer, got {json.dumps(value['id'])}")


def _valid_id(value: Any) -> RequestId:
    return value if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else None


def _lone_surrogate(value: Any) -> str | None:
    """The first string (key or value) holding an unpaired surrogate, as an escape, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            for ch in item:
                if "\ud800" <= ch <= "\udfff":
                    return f"\\u{ord(ch):04x}"
    return None


def _depth(value: Any) -> int:
    """Nesting depth of a decoded JSON value (iterative: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def read_id(text: str) -> RequestId:
    """The `id` member of a top-level JSON object read from a line that may not be valid
    JSON (truncated, too deep, a bad escape elsewhere): the value of the last `"id"` key at
    depth 1, when it is a string or an integer; else None. Scans without recursion."""
    if not text.lstrip().startswith("{"):
        return None
    decoder = json.JSONDecoder()
    depth, found, expect_key, i = 0, None, False, 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            end = _STRING.match(text, i).end()  # type: ignore[union-attr]  # always matches at a quote
            if depth == 1 and expect_key and text[i:end] == '"id"':
                found = _value_after(decoder, text, end)
            expect_key, i = False, end
            continue
        if ch in "{[":
            depth += 1
            expect_key = depth == 1
        elif ch == ",":
            expect_key = depth == 1
        elif ch in "}]":
            depth -= 1
            expect_key = False
        elif not ch.isspace():
            expect_key = False
        i += 1
    return found


def _value_after(decoder: json.JSONDecoder, text: str, key_end: int) -> RequestId:
    """The id after `"id"` at `key_end`; a number must be followed by a delimiter (a number
    at the very end of a cut line may itself be cut: 12 of 1234)."""
    colon = _WS.match(text, key_end).end()  # type: ignore[union-attr]  # `*` always matches
    if text[colon:colon + 1] != ":":
        return None
    start = _WS.match(text, colon + 1).end()  # type: ignore[union-attr]
    try:  # by index, never a copy of the rest of the line (a line may hold many "id" keys)
        value, end = decoder.raw_decode(text, start)
    except ValueError:
        return None
    if isinstance(value, str):
        return value if _lone_surrogate(value) is None else None
    after = _WS.match(text, end).end()  # type: ignore[union-attr]
    return _valid_id(value) if text[after:after + 1] in (",", "}") else None


class GuardedStdin:
    """Checked stdin lines for the SDK's `stdio_server`; rejected lines are answered on the
    stream given to `answer_on` (a clone of the server's write stream)."""

    def __init__(self, source: AsyncIterable[bytes], inflight: InFlight | None = None,
                 hint: Hint | None = None) -> None:
        self._source = source
        self._inflight = inflight
        self._hint = hint
        self._answers: Any = None
        self._ready = anyio.Event()

    def answer_on(self, stream: Any) -> None:
        self._answers = stream
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    def _track(self, text: str, request: types.JSONRPCRequest | None) -> None:
        """Tell the in-flight count what goes to the SDK: a request, or a notification (which
        may cancel one); and hand a request to the hint (mcp/hints.py)."""
        if request is not None and self._hint is not None:
            self._hint({"id": request.id, "method": request.method, "params": request.params})
        if self._inflight is None:
            return
        if request is not None:
            self._inflight.sent(request.id)
        else:
            self._inflight.notified(text)

    async def _lines(self) -> AsyncIterator[str]:
        try:
            async for raw in self._source:
                checked, request = _check(raw)
                if isinstance(checked, Rejection):
                    log.warning("answered an unreadable request (id %r): %s", checked.id, checked.message)
                    await self._ready.wait()
                    await self._answers.send(checked.answer())
                elif checked is not None:
                    self._track(checked, request)
                    yield checked
            if self._inflight is not None and not await self._inflight.drained():
                log.warning("stdin ended; requests still unanswered after %g s are cancelled", EOF_WAIT_S)
        finally:
            if self._answers is not None:
                await self._answers.aclose()  # the SDK's writer ends once every sender closed


def run_stdio(app: MCPServer, hint: Hint | None = None) -> None:
    """Serve `app` on stdin/stdout until the client closes stdin (blocks); `hint` is given each
    request as soon as its line is read (mcp/hints.py). Raises BrokenPipeError — alone, not
    inside the task group's ExceptionGroup — when the client closed stdout (the command then
    ends quietly, cli/commands.py)."""
    try:
        anyio.run(_serve, app, hint)
    except BaseExceptionGroup as group:
        broken, rest = group.split(BrokenPipeError)
        if broken is None or rest is not None:
            raise
        raise BrokenPipeError("the client closed stdout") from None


async def _serve(app: MCPServer, hint: Hint | None) -> None:
    async with open_wire(sys.stdin.buffer, sys.stdout.buffer) as wire:
        lines = wire.lines() if wire is not None else anyio.wrap_file(sys.stdin.buffer)
        await _serve_on(app, GuardedStdin(lines, wire.inflight if wire is not None else None, hint), wire)


async def _serve_on(app: MCPServer, stdin: GuardedStdin, wire: Wire | ThreadedWire | None) -> None:
    """The SDK's stdio server on our checked stdin and our claimed stdout (mcp/pipes.py; without
    one, the SDK claims stdout itself)."""
    async with stdio_server(stdin=cast(Any, stdin), stdout=cast(Any, wire)) as (read_stream, write_stream):
        stdin.answer_on(write_stream.clone())
        # What MCPServer.run_stdio_async does, on our stdin: the SDK offers no public handle
        # on its low-level server, and its stdio entry point cannot be given a reader.
        server = app._lowlevel_server
        await server.run(read_stream, write_stream, server.create_initialization_options())
