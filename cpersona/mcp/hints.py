"""What a transport reads from a request before the SDK dispatches it: a recall's query, handed
to the recall service's head start (`RecallService.prefetch_query_vector`, typed here as
service/prefetch.py `HeadStart`), so that its embedding starts while the SDK is still parsing,
validating and dispatching the request (service/prefetch.py has the why).

`query_hint(service)` returns the callable both transports are given: stdio calls it with each
request line it has parsed (`mcp/stdio.py`), HTTP with each request body it has passed on
(`RequestHints` here). It only starts work; whatever the request holds, the tool call itself
still parses, checks and answers it, and a request that is not a recall costs a dict lookup.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cpersona.service.prefetch import HeadStart

log = logging.getLogger("cpersona.mcp")

#: A hint: the decoded JSON-RPC message of one request.
Hint = Callable[[Any], None]
#: A request body longer than this is not read for a hint (a recall request is far shorter;
#: the body itself always reaches the SDK, which caps it at CPERSONA_HTTP_MAX_BODY_BYTES).
MAX_HINT_BODY = 1 << 16


def recall_query(message: Any) -> object | None:
    """The `query` argument of a `tools/call` request of `recall` (as sent, not checked); None
    for any other message, and for a recall asking for no rows (`limit` 0: answered without a
    vector)."""
    if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
        return None  # not a request (a notification is never answered)
    params = message.get("params")
    if not isinstance(params, dict) or params.get("name") != "recall":
        return None
    arguments = params.get("arguments")
    if not isinstance(arguments, dict) or arguments.get("limit", 1) == 0:
        return None
    return arguments.get("query")


def query_hint(service: HeadStart) -> Hint:
    """The hint that starts a recall's query embedding (`HeadStart.prefetch_query_vector`)."""

    warned = False

    def hint(message: Any) -> None:
        nonlocal warned
        query = recall_query(message)
        if query is None:
            return
        try:
            service.prefetch_query_vector(query)
        except Exception:  # a failed head start must not end the session
            # the recall still embeds its query itself and reports any failure of its own
            if not warned:
                warned = True
                log.warning("starting a recall's query embedding early failed (said once)", exc_info=True)

    return hint


class RequestHints:
    """ASGI middleware: hands each POSTed body, once the SDK has read all of it, to `hint` as
    decoded JSON. The body passes through unchanged; one that is not JSON, or longer than
    MAX_HINT_BODY, gives no hint."""

    def __init__(self, app: ASGIApp, hint: Hint) -> None:
        self.app = app
        self.hint = hint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        await self.app(scope, self._watching(receive), send)

    def _watching(self, receive: Receive) -> Callable[[], Awaitable[Message]]:
        parts: list[bytes] | None = []
        size = 0

        async def watched() -> Message:
            nonlocal parts, size
            message = await receive()
            if parts is None or message["type"] != "http.request":
                return message
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_HINT_BODY:
                parts = None
                return message
            parts.append(chunk)
            if not message.get("more_body", False):
                body, parts = b"".join(parts), None
                self._give(body)
            return message

        return watched

    def _give(self, body: bytes) -> None:
        try:
            decoded = json.loads(body.decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            return  # not JSON in UTF-8: the SDK answers the request with its parse error
        self.hint(decoded)
