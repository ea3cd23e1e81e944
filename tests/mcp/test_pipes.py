"""stdio on asyncio pipes (cpersona/mcp/pipes.py): lines of any length split as a file's
readline splits them, stray output kept off the wire, and the SDK's streams serving where stdin
is not a pipe."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap

import mcp_types
import pytest
from cpersona.mcp import pipes

from conftest import RawStdio, clean_env


def _lines(chunks: list[bytes]) -> list[bytes]:
    async def run() -> list[bytes]:
        reader = asyncio.StreamReader()
        for chunk in chunks:
            reader.feed_data(chunk)
        reader.feed_eof()
        return [line async for line in pipes.Wire(reader, None).lines()]  # type: ignore[arg-type]

    return asyncio.run(run())


@pytest.mark.parametrize("chunks", [
    [b""],
    [b"one\ntwo\n"],
    [b"on", b"e\ntw", b"o\n"],
    [b"one\n\ntwo"],  # a blank line; the input ends inside the last line
    [b"x" * (3 * pipes.READ_CHUNK + 5) + b"\n", b"short\n"],  # a line over several reads
])
def test_lines_are_split_as_readline_splits_them(chunks, tmp_path):
    data = b"".join(chunks)
    path = tmp_path / "in"
    path.write_bytes(data)
    with path.open("rb") as f:
        assert _lines(chunks) == f.readlines()


def test_a_request_line_far_longer_than_a_read_arrives_whole(tmp_path):
    client = RawStdio(clean_env(CPERSONA_DB_PATH=str(tmp_path / "long.db"), CPERSONA_EMBEDDING_MODE="none"), tmp_path)
    try:
        client.initialize()
        text = "ferry timetable " * 20_000  # 320,000 characters: ~5 reads of the pipe
        out = client.tool("store", {"agent_id": "kai", "content": text})
        assert out["ok"] is True and out["original_length"]["message.content"] == len(text)
        assert client.send("ping")["result"] == {}
    finally:
        assert client.close() == 0
    assert "Traceback" not in client.log()


def test_a_server_reading_stdin_from_a_file_is_served_by_the_sdk_streams(tmp_path):
    """stdin redirected from a regular file (no pipe to watch): every request still answered."""
    requests = tmp_path / "requests.jsonl"
    init = {"protocolVersion": mcp_types.LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "file", "version": "0"}}
    requests.write_text("\n".join(json.dumps(m) for m in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    )) + "\n")
    env = clean_env(CPERSONA_DB_PATH=str(tmp_path / "file.db"), CPERSONA_EMBEDDING_MODE="none")
    with requests.open("rb") as stdin:
        done = subprocess.run([sys.executable, "-m", "cpersona"], stdin=stdin, capture_output=True, env=env,
                              cwd=tmp_path, timeout=120)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2] and answers[1]["result"] == {}, done.stderr[-2000:]
    assert done.returncode == 0


def test_stray_output_while_serving_goes_to_stderr_and_stdout_comes_back(tmp_path):
    """Inside `open_wire`, fd 1 is stderr (a child's or a stray print's output never reaches the
    wire); the wire carries what is written through it; afterwards fd 1 is the wire again."""
    script = textwrap.dedent("""
        import asyncio, os, sys
        from cpersona.mcp import pipes

        async def main():
            async with pipes.open_wire(sys.stdin.buffer, sys.stdout.buffer) as wire:
                assert wire is not None
                os.write(1, b"stray\\n")
                await wire.write("on the wire\\n")
                await wire.flush()
                assert [line async for line in wire.lines()] == [b"request\\n"]
            os.write(1, b"after\\n")

        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", script], input=b"request\n", capture_output=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"on the wire\nafter\n"
    assert done.stderr == b"stray\n"


def _server(tmp_path, **popen) -> subprocess.Popen:
    env = clean_env(CPERSONA_DB_PATH=str(tmp_path / "p.db"), CPERSONA_EMBEDDING_MODE="none")
    return subprocess.Popen([sys.executable, "-m", "cpersona"], env=env, cwd=tmp_path, **popen)


def _init_lines(*more: dict) -> bytes:
    init = {"protocolVersion": mcp_types.LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "pipe", "version": "0"}}
    msgs = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"}, *more]
    return "\n".join(json.dumps(m) for m in msgs).encode()


def test_requests_sent_just_before_stdin_closes_are_all_answered(tmp_path):
    """A pipeline (`printf … | cpersona`): every request read before the end of input is
    answered — the stores among them too —, the last one even without a trailing newline."""
    stores = [{"jsonrpc": "2.0", "id": i, "method": "tools/call",
               "params": {"name": "store", "arguments": {"agent_id": "kai", "content": f"pipelined fact {i}"}}}
              for i in range(1, 31)]
    proc = _server(tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(_init_lines(*stores, {"jsonrpc": "2.0", "id": 99, "method": "ping"}), timeout=120)
    answers = {a["id"]: a for a in map(json.loads, out.splitlines())}
    assert sorted(answers) == [0, *range(1, 31), 99], err.decode()[-2000:]
    assert all(json.loads(answers[i]["result"]["content"][0]["text"])["ok"] for i in range(1, 31))
    assert proc.returncode == 0


def test_stdout_on_a_socket_is_served(tmp_path):
    """Hosts written in Node give their child sockets, not pipes: the SDK's streams serve them,
    also when the client shuts its sending side of the stdout socket down."""
    import socket

    ours_in, theirs_in = socket.socketpair()
    ours_out, theirs_out = socket.socketpair()
    proc = _server(tmp_path, stdin=theirs_in, stdout=theirs_out, stderr=subprocess.PIPE)
    theirs_in.close()
    theirs_out.close()
    ours_out.shutdown(socket.SHUT_WR)
    ours_in.sendall(_init_lines({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + b"\n")
    reader = ours_out.makefile("rb")
    assert [json.loads(reader.readline())["id"] for _ in range(2)] == [0, 1]
    ours_in.close()
    assert proc.wait(60) == 0, proc.stderr.read().decode()[-2000:]


def test_a_client_closing_stdout_ends_the_server_quietly(tmp_path):
    proc = _server(tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(_init_lines() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0
    proc.stdout.close()
    for i in range(1, 4):  # answers to a closed stdout
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}).encode() + b"\n")
        proc.stdin.flush()
    assert proc.wait(60) == 141
    assert "Traceback" not in proc.stderr.read().decode()


@pytest.mark.parametrize("how", ["eof", "SIGTERM"])
def test_stdin_and_stdout_are_blocking_again_after_the_server(tmp_path, how):
    """The pipes' files are shared with whatever reads or writes them next (`sh -c 'cpersona; cat'`):
    the server leaves them in blocking mode, also when a signal stops it."""
    import fcntl
    import os
    import signal
    import time

    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    proc = _server(tmp_path, stdin=r_in, stdout=w_out, stderr=subprocess.PIPE)
    os.write(w_in, _init_lines() + b"\n")
    with os.fdopen(r_out, "rb", buffering=0) as out:
        assert b'"id":0' in out.read(65536)
        if how == "eof":
            os.close(w_in)
        else:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        time.sleep(0.1)
        for fd in (r_in, w_out):
            assert not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_NONBLOCK
    for fd in (r_in, w_out) + ((w_in,) if how != "eof" else ()):
        os.close(fd)


def test_an_unterminated_string_in_a_long_broken_line_is_read_in_linear_memory():
    from cpersona.mcp.stdio import read_id

    line = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"' + "a" * 3_000_000
    assert read_id(line) == 7


def test_a_cancelled_request_is_not_waited_for_at_the_end_of_input():
    """MCP: a cancelled request gets no answer, so the end of stdin must not wait for one."""
    async def run() -> tuple[bool, bool]:
        inflight = pipes.InFlight()
        inflight.sent(5)
        inflight.sent("a")
        inflight.notified('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}')
        inflight.written('{"jsonrpc":"2.0","id":"a","result":{}}')
        drained = await inflight.drained(timeout_s=1.0)
        inflight.sent(6)
        return drained, await inflight.drained(timeout_s=0.05)

    assert asyncio.run(run()) == (True, False)
