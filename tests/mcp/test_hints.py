"""The transports hand a recall's query to the service before the SDK dispatches the request (mcp/hints.py)."""

from __future__ import annotations

import json
import logging

import anyio
import pytest
from cpersona.mcp.hints import MAX_HINT_BODY, RequestHints, query_hint, recall_query
from cpersona.mcp.stdio import GuardedStdin

from conftest import run_mcp

RECALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
          "params": {"name": "recall", "arguments": {"agent_id": "kai", "query": "deploy day"}}}


@pytest.mark.parametrize(("message", "query"), [
    (RECALL, "deploy day"),
    ({**RECALL, "params": {"name": "recall", "arguments": {"query": 5}}}, 5),  # as sent: the service checks it
    ({**RECALL, "params": {"name": "store", "arguments": {"query": "x"}}}, None),
    ({**RECALL, "method": "tools/list"}, None),
    ({**RECALL, "params": {"name": "recall"}}, None),
    ({**RECALL, "params": {"name": "recall", "arguments": ["x"]}}, None),
    ({**RECALL, "params": None}, None),
    ({k: v for k, v in RECALL.items() if k != "id"}, None),  # a notification: never answered
    ({**RECALL, "params": {"name": "recall", "arguments": {"query": "x", "limit": 0}}}, None),  # no rows asked
    ({**RECALL, "params": {"name": "recall", "arguments": {"query": "x", "limit": 3}}}, "x"),
    ([RECALL], None),
    ("recall", None),
])
def test_recall_query_reads_only_a_recall_call(message, query):
    assert recall_query(message) == query


class _Engine:
    def __init__(self, fail: bool = False) -> None:
        self.queries: list[object] = []
        self.fail = fail

    def prefetch_query_vector(self, query: object) -> bool:
        if self.fail:
            raise ValueError("boom")
        self.queries.append(query)
        return True


def test_query_hint_passes_the_query_and_a_failure_is_logged_once(caplog):
    eng = _Engine()
    query_hint(eng)(RECALL)  # type: ignore[arg-type]
    query_hint(eng)({**RECALL, "method": "ping"})  # type: ignore[arg-type]
    assert eng.queries == ["deploy day"]
    hint = query_hint(_Engine(fail=True))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="cpersona.mcp"):
        hint(RECALL)
        hint(RECALL)
    assert len([r for r in caplog.records if "early failed" in r.message]) == 1


def test_stdio_reader_hints_each_request_it_hands_on():
    seen: list[object] = []
    lines = [json.dumps(RECALL).encode(), b"not json\n", b"\n",
             json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
             json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}).encode()]

    async def source():
        for line in lines:
            yield line

    class Sink:
        async def send(self, _message) -> None:
            pass

        async def aclose(self) -> None:
            pass

    async def main() -> list[str]:
        stdin = GuardedStdin(source(), hint=lambda m: seen.append(recall_query(m)))
        stdin.answer_on(Sink())
        return [line async for line in stdin]

    handed = anyio.run(main)
    assert len(handed) == 3  # the recall, the notification and tools/list; the bad line is answered here
    assert seen == ["deploy day", None]  # requests only: no hint for a notification or a rejected line


def _asgi(body_parts: list[bytes], hints: list[object], method: str = "POST") -> bytes:
    got: list[bytes] = []

    async def app(scope, receive, send) -> None:
        while True:
            message = await receive()
            got.append(message.get("body", b""))
            if not message.get("more_body"):
                return

    async def main() -> None:
        parts = iter(body_parts)

        async def receive():
            part = next(parts)
            return {"type": "http.request", "body": part, "more_body": part is not body_parts[-1]}

        await RequestHints(app, hints.append)({"type": "http", "method": method}, receive, None)

    anyio.run(main)
    return b"".join(got)


def test_http_hints_see_the_whole_body_and_pass_it_on_unchanged():
    body = json.dumps(RECALL).encode()
    hints: list[object] = []
    assert _asgi([body[:10], body[10:30], body[30:]], hints) == body
    assert hints == [RECALL]


@pytest.mark.parametrize("body", [b"{not json", b"[" * 20_000, b'{"pad": "' + b"x" * MAX_HINT_BODY + b'"}',
                                  json.dumps(RECALL).encode("utf-16")])  # JSON, but not the UTF-8 the SDK reads
def test_http_body_that_is_not_readable_json_gives_no_hint_and_still_passes(body):
    hints: list[object] = []
    assert _asgi([body[:5], body[5:]], hints) == body
    assert hints == []


def test_http_get_is_passed_through_without_a_hint():
    hints: list[object] = []
    assert _asgi([b"{}"], hints, method="GET") == b"{}"
    assert hints == []


def test_stdio_recall_embeds_its_query_once_with_the_hint(tmp_path, fake_embed):
    """The transport's head start and the recall share one embedding (no query-vector cache
    to hide a second one)."""
    counts: dict[str, int] = {}

    async def scenario(client):
        await client.ok("store", {"agent_id": "kai", "content": "the deploy runs on thursday evenings"})
        await client.ok("recall", {"agent_id": "kai", "query": "warm up", "limit": 1})
        counts["before"] = fake_embed.requests
        out = await client.ok("recall", {"agent_id": "kai", "query": "when is the deploy?", "limit": 3})
        counts["after"] = fake_embed.requests
        return out

    run = run_mcp(scenario, tmp_path / "h.db", env={
        "CPERSONA_EMBEDDING_MODE": "http", "CPERSONA_EMBEDDING_URL": fake_embed.url,
        "CPERSONA_EMBEDDING_CACHE_SIZE": "0"})
    assert counts["after"] - counts["before"] == 1
    assert "thursday" in run.result["messages"][-1]["content"]
