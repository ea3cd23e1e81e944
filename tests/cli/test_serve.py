"""`cpersona serve` as a user and a host meet it: one startup line naming what runs, Ctrl-C
stops it cleanly, and the bundled model loads at process start in every transport so the
first store and recall of a session already have vectors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from cpersona.embedding.local import model_installed

from conftest import clean_env, run_mcp

needs_model = pytest.mark.skipif(not model_installed("use"), reason="bundled model not installed ('.[embed]')")


def _spawn(env: dict[str, str], cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cpersona"], env=env, cwd=str(cwd), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_line(proc: subprocess.Popen, needle: str, timeout: float = 60) -> list[str]:
    """stderr lines read until one contains `needle` (fails after `timeout` seconds)."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"no {needle!r} on stderr: {lines}")


def test_startup_line_and_ctrl_c_stop_cleanly(tmp_path):
    db = tmp_path / "s.db"
    proc = _spawn(clean_env(CPERSONA_DB_PATH=str(db), CPERSONA_EMBEDDING_MODE="none"), tmp_path)
    try:
        line = _wait_for_line(proc, "cpersona ")[-1]
        for part in ("MCP on stdio", f"database {db}", "embedding none", "stop: Ctrl-C"):
            assert part in line, line
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        rest = proc.stderr.read()
        assert "Traceback" not in rest and "stopped (Ctrl-C)" in rest
        assert proc.stdout.read() == ""  # stdout is the protocol: nothing else is ever printed there
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
        return [int(c) for c in f.read().split()]


@needs_model
@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"), reason="needs Linux /proc")
def test_sigterm_closes_the_server_and_ends_a_stopped_embedding_worker(tmp_path):
    """Hosts stop a server with SIGTERM: it closes (not the default instant death, which left
    a worker stopped by SIGSTOP behind) and exits at once, not after the worker's watchdog."""
    proc = _spawn(clean_env(CPERSONA_DB_PATH=str(tmp_path / "t.db"), CPERSONA_EMBEDDING_MODE="local"), tmp_path)
    try:
        _wait_for_line(proc, "cpersona ")
        deadline = time.monotonic() + 30
        while not (workers := _children(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert workers, "no embedding worker started"
        os.kill(workers[0], signal.SIGSTOP)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert time.monotonic() - started < 10
        assert "stopped (SIGTERM)" in proc.stderr.read()
        with pytest.raises(ProcessLookupError):  # killed and reaped by the server before it exited
            os.kill(workers[0], 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_original_layout_database_is_used_and_named(tmp_path):
    legacy = tmp_path / "data" / "cpersona.db"
    legacy.parent.mkdir()
    legacy.write_bytes(b"")
    env = {k: v for k, v in clean_env(CPERSONA_EMBEDDING_MODE="none").items() if k != "CPERSONA_DB_PATH"}
    proc = _spawn(env, tmp_path)
    try:
        line = _wait_for_line(proc, "cpersona ")[-1]
        assert f"database {legacy}" in line and "original CPersona" in line
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


@needs_model
def test_http_transport_loads_the_model_at_process_start(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = clean_env(CPERSONA_DB_PATH=str(tmp_path / "h.db"), CPERSONA_EMBEDDING_MODE="local",
                    CPERSONA_TRANSPORT="streamable-http", CPERSONA_HTTP_PORT=str(port),
                    CPERSONA_AUTH_TOKEN="serve-test-token-0123456789abcdefghij", CPERSONA_LOG_LEVEL="info")
    proc = _spawn(env, tmp_path)
    try:
        lines = _wait_for_line(proc, "local embedding model", timeout=120)  # no client has connected
        assert "loaded in" in lines[-1]
        assert any(f"MCP at http://127.0.0.1:{port}/mcp" in line for line in lines)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


@needs_model
def test_first_store_and_recall_of_a_session_have_vectors(tmp_path):
    """The agent's first calls come while the model may still be loading: both wait for it."""

    async def scenario(client):
        stored = await client.ok("store", {"agent_id": "kai", "content": "Our staging cluster runs in Frankfurt"})
        found = await client.ok("recall", {"agent_id": "kai", "query": "where does the staging cluster run?",
                                           "verbose": True})
        return stored, found

    started = time.monotonic()
    run = run_mcp(scenario, tmp_path / "v.db", env={"CPERSONA_EMBEDDING_MODE": "local",
                                                     "CPERSONA_MODEL_WAIT_SECONDS": "90"})
    stored, found = run.result
    assert stored["embedded"] is True, stored
    assert "advisory" not in found, found
    best = found["messages"][-1]
    assert best["content"] == "Our staging cluster runs in Frankfurt" and "cosine" in best["match_reason"]
    assert time.monotonic() - started < 120
    assert os.path.exists(tmp_path / "v.db")


def test_startup_line_names_the_postgresql_database_it_serves():
    """With CPERSONA_DB_URL the line names that database (without its password), not the
    SQLite file it does not use (found by a break-it pass)."""
    from types import SimpleNamespace

    from cpersona.cli.serve import startup_line
    from cpersona.config import Settings

    settings = Settings.from_env({}, db_url="postgresql://mem:secret@db.example/cpersona")
    engine = SimpleNamespace(db=SimpleNamespace(path="postgresql://mem@db.example/cpersona"), embedder=None)
    line = startup_line(settings, engine)  # type: ignore[arg-type]
    assert "database postgresql://mem@db.example/cpersona" in line and "secret" not in line
    assert ".db" not in line.split("database ")[1].split(" — ")[0]


def _workers_of(pid: int) -> list[int]:
    """Embedding worker processes whose parent is `pid` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmd:
                command = cmd.read()
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid and b"cpersona.embedding.worker" in command:
            found.append(int(entry))
    return found


def _ended(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@needs_model
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads process tables from /proc")
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL])
def test_the_model_runs_in_one_worker_process_that_ends_with_the_server(tmp_path, stop):
    """CPERSONA_EMBEDDING_PROCESS (default true): the bundled model runs in a child process;
    Ctrl-C or kill -9 of the server leaves no worker behind."""
    env = clean_env(CPERSONA_DB_PATH=str(tmp_path / "w.db"), CPERSONA_EMBEDDING_MODE="local",
                    CPERSONA_LOG_LEVEL="info")
    proc = _spawn(env, tmp_path)
    try:
        assert "loaded in" in _wait_for_line(proc, "local embedding model", timeout=120)[-1]
        workers = _workers_of(proc.pid)
        assert len(workers) == 1, workers
        proc.send_signal(stop)
        proc.wait(timeout=30)
        assert _ended(workers[0], 15), f"worker {workers[0]} outlived its server"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ------------------------------------------------ --transport / --host / --port


def test_serve_help_documents_the_transport_host_and_port_flags(capsys):
    from cpersona.cli.commands import main

    assert main(["serve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for part in ("--transport {stdio,streamable-http}", "--host HOST", "--port PORT", "CPERSONA_TRANSPORT",
                 "CPERSONA_HTTP_HOST", "CPERSONA_HTTP_PORT", "8402", "127.0.0.1"):
        assert part in text, part


def test_serve_flags_win_over_the_environment_and_absent_flags_keep_it():
    from cpersona.cli.commands import build_parser
    from cpersona.cli.serve import with_flags
    from cpersona.config import Settings

    env = Settings.from_env({"CPERSONA_TRANSPORT": "stdio", "CPERSONA_HTTP_HOST": "127.0.0.2",
                             "CPERSONA_HTTP_PORT": "9000"})
    given = with_flags(env, build_parser().parse_args(["serve", "--transport", "streamable-http", "--port", "9100"]))
    assert (given.transport, given.http_host, given.http_port) == ("streamable-http", "127.0.0.2", 9100)
    unchanged = with_flags(env, build_parser().parse_args(["serve"]))
    assert (unchanged.transport, unchanged.http_host, unchanged.http_port) == ("stdio", "127.0.0.2", 9000)
    host = with_flags(env, build_parser().parse_args(["serve", "--host", "0.0.0.0"]))
    assert (host.transport, host.http_host) == ("stdio", "0.0.0.0")


@pytest.mark.parametrize(("flags", "needle"), [
    (["--transport", "sse"], "argument --transport: expected one of stdio, streamable-http, got 'sse'"),
    (["--port", "0"], "argument --port: expected an integer in [1, 65535], got '0'"),
    (["--port", "http"], "argument --port: expected an integer in [1, 65535], got 'http'"),
])
def test_a_bad_serve_flag_is_a_usage_error_naming_the_flag_and_the_rule(tmp_path, flags, needle):
    proc = subprocess.run([sys.executable, "-m", "cpersona", "serve", *flags], capture_output=True, text=True,
                          env=clean_env(CPERSONA_DB_PATH=str(tmp_path / "bad.db")), timeout=60)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert not (tmp_path / "bad.db").exists()  # nothing opened


def test_serve_transport_flag_serves_streamable_http_where_the_flags_say(tmp_path):
    """`cpersona serve --transport streamable-http --port P` with CPERSONA_TRANSPORT=stdio and
    another port in the environment: it listens on P, checks the token, answers tools/list."""
    from http_helpers import TOKENS, free_port, post_rpc

    port, other = free_port(), free_port()
    env = clean_env(CPERSONA_DB_PATH=str(tmp_path / "f.db"), CPERSONA_EMBEDDING_MODE="none",
                    CPERSONA_TRANSPORT="stdio", CPERSONA_HTTP_PORT=str(other), CPERSONA_AUTH_TOKEN=TOKENS["main"])
    proc = subprocess.Popen([sys.executable, "-m", "cpersona", "serve", "--transport", "streamable-http",
                             "--host", "127.0.0.1", "--port", str(port)], env=env, cwd=str(tmp_path),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = _wait_for_line(proc, "cpersona ")[-1]
        assert f"MCP at http://127.0.0.1:{port}/mcp" in line, line
        url = f"http://127.0.0.1:{port}/mcp"
        assert post_rpc(url, "tools/list").status_code == 401
        listed = post_rpc(url, "tools/list", token=TOKENS["main"])
        assert listed.status_code == 200 and "recall" in {t["name"] for t in listed.json()["result"]["tools"]}
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
