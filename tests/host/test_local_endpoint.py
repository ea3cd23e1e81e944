"""The local endpoint (host/endpoint.py, util/local_channel.py): a server up answers, none
down, a stale socket is removed, two servers of one database share it (one owns it, the other
takes over when it stops), an unsafe runtime directory turns it off — and a real `cpersona
serve` answers the hooks and the CLI until it is killed, after which they answer by themselves."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from cpersona.host.endpoint import LocalEndpoint
from cpersona.util import local_channel
from cpersona.util.places import db_target

from claude_transcript import a_session, hook_input
from conftest import RawStdio, clean_env

pytestmark = pytest.mark.skipif(bool(local_channel.available()), reason="no unix sockets here")

#: Seconds a test waits for something that happens in the background (a hang guard, not a timing assertion).
PATIENCE = 60.0


def eventually(check, what: str):
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def short_dir() -> Path:
    """A private folder with a short path (a socket path has at most ~100 bytes; pytest's are long)."""
    folder = Path(tempfile.mkdtemp(prefix="cp-"))
    os.chmod(folder, 0o700)
    return folder


@pytest.fixture
def runtime(monkeypatch):
    folder = short_dir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    yield folder / "cpersona"
    shutil.rmtree(folder, ignore_errors=True)


def echo(name: str):
    return lambda op, args: {"ok": True, "op": op, "args": args, "by": name}


def test_a_server_up_answers_and_the_channel_is_private(runtime):
    ep = LocalEndpoint("/data/a.db", echo("one"))
    ep.start()
    try:
        eventually(lambda: ep.owner, "the endpoint claimed")
        answer = local_channel.call("/data/a.db", "status", {"x": "é"}, 5.0)
        assert answer == {"ok": True, "op": "status", "args": {"x": "é"}, "by": "one"}
        sock, _lock = local_channel.paths("/data/a.db", runtime)
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700 and stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert local_channel.call("/data/other.db", "status", {}, 5.0) is None  # another database: no server
    finally:
        ep.close()
    assert not local_channel.paths("/data/a.db", runtime)[0].exists()  # closed: its socket removed
    assert local_channel.call("/data/a.db", "status", {}, 5.0) is None  # down


def test_a_stale_socket_is_removed(runtime):
    runtime.mkdir(mode=0o700)
    sock, _lock = local_channel.paths("/data/a.db", runtime)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(os.fspath(sock))  # a killed server's socket: the file stays, nobody listens or holds the lock
    dead.close()
    assert sock.exists()
    assert local_channel.call("/data/a.db", "status", {}, 5.0) is None
    assert not sock.exists()
    ep = LocalEndpoint("/data/a.db", echo("new"))  # and a new owner binds where it was
    ep.start()
    try:
        eventually(lambda: ep.owner, "the endpoint claimed")
        assert local_channel.call("/data/a.db", "status", {}, 5.0)["by"] == "new"
    finally:
        ep.close()


def test_two_servers_of_one_database_one_owns_the_other_takes_over(runtime):
    first, second = LocalEndpoint("/data/a.db", echo("first")), LocalEndpoint("/data/a.db", echo("second"))
    first.start()
    eventually(lambda: first.owner, "the first claimed it")
    second.start()
    try:
        eventually(lambda: second.why_not, "the second noticed the owner")
        assert not second.owner and "another server" in second.why_not
        assert local_channel.call("/data/a.db", "status", {}, 5.0)["by"] == "first"
        first.close()
        eventually(lambda: second.owner, "the second took over")
        assert local_channel.call("/data/a.db", "status", {}, 5.0)["by"] == "second"
    finally:
        first.close()
        second.close()


def test_an_unsafe_runtime_directory_turns_the_endpoint_off(runtime):
    runtime.mkdir(mode=0o755)
    os.chmod(runtime, 0o755)
    with pytest.raises(local_channel.ChannelUnavailable, match="not private"):
        local_channel.runtime_dir()
    ep = LocalEndpoint("/data/a.db", echo("x"))
    ep.start()
    eventually(lambda: ep.why_not, "the endpoint gave up")
    assert not ep.owner and "not private" in ep.why_not
    assert local_channel.ask_server("/data/a.db", "status", {}, 5.0) is None  # clients answer by themselves
    ep.close()


def test_a_malformed_request_gets_an_error_answer(runtime):
    ep = LocalEndpoint("/data/a.db", echo("x"))
    ep.start()
    try:
        eventually(lambda: ep.owner, "claimed")
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(os.fspath(local_channel.paths("/data/a.db", runtime)[0]))
        conn.sendall(b'{"op": 3}\n')
        assert local_channel.read_frame(conn) == {"ok": False, "error": "a request is {op: string, args: object}"}
        conn.close()
    finally:
        ep.close()


# ----------------------------------------------------------------------- a real server
def run_hook(event: str, data: dict, env: dict, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cpersona", "hook", event], input=json.dumps(data), text=True,
                          capture_output=True, env=env, cwd=cwd, timeout=120)


def last_log_line(state_home) -> str:
    return (state_home / "cpersona" / "hooks.log").read_text(encoding="utf-8").splitlines()[-1]


def test_hooks_use_a_running_server_and_answer_alone_once_it_is_killed(tmp_path):
    db = tmp_path / "m.db"
    run_dir, state = short_dir(), tmp_path / "state"
    env = clean_env(CPERSONA_DB_PATH=str(db), CPERSONA_EMBEDDING_MODE="none", XDG_RUNTIME_DIR=str(run_dir),
                    XDG_STATE_HOME=str(state))
    t = a_session(tmp_path / "t.jsonl")
    server = RawStdio(env, tmp_path)
    try:
        server.initialize()
        key = db_target("", str(db)).key
        os.environ["XDG_RUNTIME_DIR"], saved = str(run_dir), os.environ["XDG_RUNTIME_DIR"]
        try:
            status = eventually(lambda: local_channel.ask_server(key, "status", {}, 10.0), "the server's endpoint")
        finally:
            os.environ["XDG_RUNTIME_DIR"] = saved
        assert status["ok"] and status["pid"] == server.proc.pid
        done = run_hook("Stop", hook_input("Stop", t, str(tmp_path)), env, tmp_path)
        assert done.returncode == 0 and done.stdout == "" and "4 turns stored" in last_log_line(state)
        assert "(server," in last_log_line(state)
        assert server.tool("list_memories", {"agent_id": "claude-code"})["count"] == 4  # the server's own view
        ask = hook_input("UserPromptSubmit", t, str(tmp_path), prompt="who approves releases?")
        ask["session_id"] = "another-session"
        warm = run_hook("UserPromptSubmit", ask, env, tmp_path)
        assert warm.returncode == 0 and "Aiko Suzuki" in json.loads(warm.stdout)["hookSpecificOutput"][
            "additionalContext"]
        cli = subprocess.run([sys.executable, "-m", "cpersona", "stats", "--json"], capture_output=True, text=True,
                             env=env, cwd=tmp_path, timeout=120)
        assert cli.returncode == 0 and json.loads(cli.stdout)["answered_by"] == "the running server"
    finally:
        server.proc.kill()  # kill -9: its socket file stays behind
        server.proc.wait(30)
    sock = local_channel.paths(db_target("", str(db)).key, run_dir / "cpersona")[0]
    assert sock.exists()
    cold = run_hook("UserPromptSubmit", ask, env, tmp_path)
    assert cold.returncode == 0 and "Aiko Suzuki" in cold.stdout  # answered in the hook's own process
    assert "this process (keyword only)" in last_log_line(state) and not sock.exists()


def test_recalls_wait_for_the_servers_model_stores_do_not(runtime, make_engine, monkeypatch):
    """Until the server's model is loaded (and its recall path warm) a recall is answered
    not_ready — the asker answers it itself — while other requests are served at once."""
    from cpersona.host import local

    loaded = threading.Event()

    def slow_warm(engine, ready, endpoint):
        loaded.wait(PATIENCE)
        ready.set()

    monkeypatch.setattr(local, "_warm", slow_warm)
    engine = make_engine()
    endpoint = local.start_endpoint(engine.settings, engine)
    try:
        key = db_target(engine.settings.db_url, engine.settings.db_path).key
        eventually(lambda: endpoint.owner, "claimed")
        assert local_channel.call(key, "context", {"query": "deploys"}, 5.0)["not_ready"] is True
        assert local_channel.ask_server(key, "context", {"query": "deploys"}, 5.0) is None
        assert local_channel.ask_server(key, "stats", {}, 5.0)["agents"] == []
        loaded.set()
        eventually(lambda: local_channel.ask_server(key, "context", {"query": "deploys"}, PATIENCE), "recalls served")
    finally:
        loaded.set()
        endpoint.close()
