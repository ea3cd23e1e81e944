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
