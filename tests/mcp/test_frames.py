"""Every line a client sends gets an answer: frames the SDK cannot read (invalid UTF-8,
invalid JSON, a lone surrogate escape, nesting deeper than its parser allows, JSON that is
not JSON-RPC) are answered with one JSON-RPC error — with the request's id when it can be
read — and nothing of them is stored; the session goes on."""

from __future__ import annotations

import json

import pytest
from cpersona.mcp.stdio import MAX_DEPTH, check_line, read_id
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import RawStdio, clean_env, db_rows

PARSE_ERROR, INVALID_REQUEST = -32700, -32600


def _store_frame(rid, content_json: bytes) -> bytes:
    return (b'{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"store","arguments":'
            b'{"agent_id":"kai","message":{"content":%s}}}}' % (json.dumps(rid).encode(), content_json))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("frames")
    client = RawStdio(clean_env(CPERSONA_DB_PATH=str(folder / "frames.db"), CPERSONA_EMBEDDING_MODE="none"), folder)
    assert client.initialize()["result"]["serverInfo"]["name"] == "cloto-mcp-cpersona"
    yield client, folder / "frames.db"
    assert client.close() == 0
    assert "Traceback" not in client.log()


def _answer(client: RawStdio, frame: bytes) -> dict:
    """Send a malformed frame, then a ping: the frame must get exactly one answer, before the ping's."""
    client.send_frame(frame)
    answer = client.reply()
    pong = client.send("ping")
    assert pong.get("result") == {}, (answer, pong)
    return answer


def _stored(path) -> list[str]:
    return [r[0] for r in db_rows(path, "SELECT content FROM memories")]


@pytest.mark.parametrize(("name", "frame", "rid", "code", "needle"), [
    ("invalid UTF-8", _store_frame(11, b'"caf\xe9 au lait"'), 11, PARSE_ERROR, "not valid UTF-8"),
    ("lone surrogate", _store_frame("s-12", b'"half an emoji \\ud83d"'), "s-12", PARSE_ERROR, "surrogate"),
    ("too deep", _store_frame(13, b"[" * 300 + b"]" * 300), 13, PARSE_ERROR, "deeper than"),
    ("far too deep", _store_frame(14, b"[" * 50_000 + b"]" * 50_000), 14, PARSE_ERROR, "deeper than"),
    ("truncated", _store_frame(15, b'"cut off"')[:-9], 15, PARSE_ERROR, "not valid JSON"),
    ("garbage", b"this is not json at all", None, PARSE_ERROR, "not valid JSON"),
    ("not an object", b"[1, 2, 3]", None, INVALID_REQUEST, "not a JSON-RPC 2.0 message"),
    ("no method", b'{"jsonrpc":"2.0","id":16}', 16, INVALID_REQUEST, "not a JSON-RPC 2.0 message"),
    ("fractional id", b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None, INVALID_REQUEST, "id must be"),
])
def test_an_unreadable_request_is_answered_and_changes_nothing(server, name, frame, rid, code, needle):
    client, path = server
    before = _stored(path)
    answer = _answer(client, frame)
    assert answer["id"] == rid and answer["error"]["code"] == code, answer
    assert needle in answer["error"]["message"]
    assert _stored(path) == before


def test_text_with_a_whole_emoji_and_accents_is_stored_verbatim(server):
    client, path = server
    text = "café ☕ 🦀 naïve"
    assert client.tool("store", {"agent_id": "kai", "message": {"content": text}})["result"] == "stored"
    assert text in _stored(path)


def test_blank_lines_are_skipped(server):
    client, _ = server
    client.send_frame(b"   ")
    client.send_frame(b"")
    assert client.send("ping")["result"] == {}


def test_read_id_finds_the_top_level_id_in_broken_frames():
    assert read_id('{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":[[[') == 7
    assert read_id('{"params":{"id":1},"id":"outer"') == "outer"
    assert read_id('{"x":"a \\"id\\": 3 inside a string","id":4}') == 4
    assert read_id('{"params":[[[[, "id": 9') is None  # inside an unclosed array: not the request's
    assert read_id('[{"id":2}]') is None and read_id('{"id":true}') is None and read_id('{"id":2.5}') is None


# ---------------------------------------------------------------- generated
def _valid_frame(rid: int, text: str) -> bytes:
    return _store_frame(rid, json.dumps(text).encode())


MUTATIONS = ("truncate", "bad byte", "lone surrogate", "deep", "random bytes", "wrong shape", "bad id")


@st.composite
def malformed(draw):
    """(frame, the id an answer must carry or None when it cannot be read)."""
    rid = draw(st.integers(1_000, 10**9))
    text = draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=40))
    frame = _valid_frame(rid, "generated " + text)
    kind = draw(st.sampled_from(MUTATIONS))
    head = frame.index(b',"method"')  # the id is readable in any prefix longer than this
    if kind == "truncate":
        cut = draw(st.integers(1, len(frame) - 1))
        return frame[:cut], (rid if cut > head else None)
    if kind == "bad byte":
        at = draw(st.integers(head + 1, len(frame) - 1))
        return frame[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])) + frame[at:], rid
    if kind == "lone surrogate":
        half = draw(st.sampled_from(["\\ud83d", "\\udc00", "\\udfff"]))
        return _store_frame(rid, b'"' + json.dumps("generated " + text)[1:-1].encode() + half.encode() + b'"'), rid
    if kind == "deep":
        depth = draw(st.integers(MAX_DEPTH, 5_000))
        return _store_frame(rid, b"[" * depth + b"]" * depth), rid
    if kind == "random bytes":
        raw = draw(st.binary(min_size=1, max_size=200)).replace(b"\n", b" ").replace(b"\r", b" ")
        return (b"\x01" + raw if not raw.strip() else raw), None
    if kind == "wrong shape":
        value = draw(st.sampled_from([[], [rid], "text", 3, None, {"jsonrpc": "2.0", "id": rid}]))
        return json.dumps(value).encode(), (rid if isinstance(value, dict) else None)
    return json.dumps({"jsonrpc": "2.0", "id": draw(st.sampled_from([1.5, True, None, [1], {}])),
                       "method": "ping"}).encode(), None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=malformed())
def test_every_malformed_frame_gets_exactly_one_answer(server, case):
    frame, rid = case
    if not isinstance(check_line(frame), str):  # a mutation may leave a valid message: nothing to check
        client, path = server
        before = _stored(path)
        answer = _answer(client, frame)
        assert "error" in answer and answer["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST), answer
        assert answer["id"] == rid, (frame[:120], answer)
        assert _stored(path) == before
