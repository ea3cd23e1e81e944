"""Shared fixtures for the cpersona test suite.

* `make_engine(**overrides)` — an `Engine` on a fresh file under tmp_path (closed at teardown).
* `engine_none`  — embeddings off (keyword/FTS only).
* `fake_embed`   — module-scoped deterministic /embed server (`.fail = True` → 503).
* `engine_http`  — http embedding mode against `fake_embed`.
* `run_mcp(scenario, db_path, env)` — spawn `python -m cpersona` over stdio with the
  official `mcp` client, run `await scenario(client)` and return its result.
* `RawStdio(env, cwd)` — a bare JSON-RPC client over a spawned server's stdio (byte frames,
  kill -9, a custom command line).
* `db_counts(path)` / `db_rows(path, sql)` — read the SQLite file directly.
* `in_thread(fn, seconds)` — fn() in a fresh thread: its result or exception, TimeoutError if it hangs.

* `backend` / `where` / `db` (tests/backends.py) — run a test on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from cpersona.config import Settings
from cpersona.devtools.fake_embed import FakeEmbedServer
from cpersona.service.engine import Engine

pytest.register_assert_rewrite("backends")
from backends import PG_FILES, EnginePlaces, pg_rows  # noqa: E402 — after the rewrite registration

#: The `backend` / `where` / `db` fixtures (tests/backends.py): one test, both storage backends.
pytest_plugins = ("backends", "calibration_fixtures")

#: Databases and exports written by the original releases (../shared/fixtures beside the checkout;
#: CPERSONA_FIXTURES names another folder, e.g. for a git worktree that lives elsewhere).
FIXTURES = Path(os.environ.get("CPERSONA_FIXTURES") or Path(__file__).resolve().parents[2] / "shared" / "fixtures")

#: Seconds one spawned MCP scenario may take before the test fails (hang guard, not a timing assertion).
MCP_SCENARIO_TIMEOUT = 90

#: Servers spawned by tests never look at the real package index (tests/updates/ uses a local fake):
#: every subprocess inherits this, and the helpers below pass it on.
NO_UPDATE_CHECK = {"CPERSONA_UPDATE_CHECK": "false"}
os.environ.update(NO_UPDATE_CHECK)
# The per-user directories (settings file, default database) of this test session are empty
# temp folders: a developer's own ~/.config/cpersona/config.toml must not change a test, and no
# test may write into the developer's memory file. Spawned servers inherit these variables.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="cpersona-test-config-")
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="cpersona-test-data-")
# ... and so are the runtime directory (the local endpoints of spawned servers) and the state
# directory (the hook log, capture progress).
os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="cpersona-test-run-")
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="cpersona-test-state-")
for _folder in (os.environ["XDG_CONFIG_HOME"], os.environ["XDG_DATA_HOME"], os.environ["XDG_RUNTIME_DIR"],
                os.environ["XDG_STATE_HOME"]):
    atexit.register(shutil.rmtree, _folder, True)  # removed when the session ends (ignore_errors)


# --------------------------------------------------------------------------- engines
def new_engine(db_path: str | Path, **overrides: Any) -> Engine:
    """Engine on `db_path`; embeddings off unless `embedding_mode` is overridden."""
    overrides.setdefault("embedding_mode", "none")
    return Engine(Settings.from_env({}, db_path=str(db_path), **overrides))


@pytest.fixture
def make_engine(tmp_path, engine_backend):
    """Factory: make_engine(name="x.db", **settings_overrides) → Engine (closed at teardown).
    In a test marked `both_backends` it runs once on SQLite and once on PostgreSQL (a fresh
    schema per name; `db_rows(tmp_path / name, …)` reads it)."""
    made: list[Engine] = []
    places = EnginePlaces(engine_backend, tmp_path)

    def factory(name: str = "x.db", **overrides: Any) -> Engine:
        place = places.overrides(name)
        eng = new_engine(place.pop("db_path"), **{**place, **overrides})
        made.append(eng)
        return eng

    yield factory
    for eng in reversed(made):
        eng.close()
    places.close()


@pytest.fixture
def engine_none(make_engine) -> Engine:
    """Embeddings off: keyword/FTS only, advisory state `hint`."""
    return make_engine(embedding_mode="none")


@pytest.fixture(scope="module")
def fake_embed():
    """Deterministic hashed bag-of-words /embed server (512-d) for the whole module."""
    server = FakeEmbedServer().start()
    yield server
    server.stop()


@pytest.fixture
def http_engine_factory(make_engine, fake_embed):
    """Factory for http-mode engines against `fake_embed`; resets `fake_embed.fail`."""
    fake_embed.fail = False

    def factory(name: str = "x.db", **overrides: Any) -> Engine:
        return make_engine(name, embedding_mode="http", embedding_url=fake_embed.url, **overrides)

    yield factory
    fake_embed.fail = False


@pytest.fixture
def engine_http(http_engine_factory) -> Engine:
    """http embedding mode against the module's fake /embed server."""
    return http_engine_factory()


# ------------------------------------------------------------------------ raw file
def db_rows(path: str | Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Run one read query on the file with a private connection (on the PostgreSQL schema
    standing in for that file in a both-backends test)."""
    if str(path) in PG_FILES:
        return pg_rows(PG_FILES[str(path)], sql, params)
    conn = sqlite3.connect(str(path))
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def db_counts(path: str | Path) -> dict[str, int]:
    """Row counts of the user tables (memories, episodes, profiles)."""
    return {t: db_rows(path, f"SELECT COUNT(*) FROM {t}")[0][0] for t in ("memories", "episodes", "profiles")}


def wait_until(predicate: Callable[[], bool], timeout: float = 15.0, step: float = 0.05) -> bool:
    """Poll `predicate` until true or `timeout` seconds pass (eventual consistency, not speed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def in_thread(fn: Callable[[], Any], seconds: float = 60.0) -> Any:
    """Run fn() in a fresh daemon thread (its own per-thread read connection) and return what
    it returned or raised; raises TimeoutError while it is still running after `seconds`."""
    out: list = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as err:  # noqa: BLE001 — handed to the test
            out.append(err)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeoutError(f"still running after {seconds} s")
    return out[0]


# ----------------------------------------------------------------------------- MCP
@dataclass
class Reply:
    """One tool result: `is_error` (SDK-level error), raw `text`, parsed JSON `data` (or None)."""

    is_error: bool
    text: str
    data: Any

    @property
    def failed(self) -> bool:
        """Failure by the spec's client rule: SDK error, `ok: false`, or an `error` key."""
        if self.is_error or not isinstance(self.data, dict):
            return True
        return self.data.get("ok") is False or "error" in self.data


@dataclass
class McpClient:
    """A live client session to a spawned `python -m cpersona`."""

    session: Any
    init: Any
    stream_errors: list = field(default_factory=list)

    async def call_raw(self, tool: str, arguments: dict | None = None):
        return await self.session.call_tool(tool, arguments or {})

    async def call(self, tool: str, arguments: dict | None = None) -> Reply:
        result = await self.call_raw(tool, arguments)
        assert len(result.content) == 1, f"{tool}: expected ONE content block, got {result.content!r}"
        text = result.content[0].text
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        return Reply(bool(result.is_error), text, data)

    async def ok(self, tool: str, arguments: dict | None = None) -> dict:
        """Call a tool that must succeed; returns its parsed JSON."""
        reply = await self.call(tool, arguments)
        assert not reply.is_error and isinstance(reply.data, dict), f"{tool} failed: {reply.text}"
        return reply.data


@dataclass
class McpRun:
    result: Any
    stream_errors: list
    stderr: str


def run_mcp(
    scenario: Callable[[McpClient], Awaitable[Any]],
    db_path: str | Path,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
) -> McpRun:
    """Spawn `sys.executable -m cpersona` over stdio, initialize, run the scenario.

    `stream_errors` collects every transport-level exception the client saw — a line on
    stdout that is not JSON-RPC shows up there. Server stderr is captured in `stderr`.
    """
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    server_env = {"CPERSONA_DB_PATH": str(db_path), "CPERSONA_EMBEDDING_MODE": "none", **NO_UPDATE_CHECK}
    server_env.update(env or {})
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cpersona"], env=server_env, cwd=str(cwd or Path(db_path).parent)
    )
    stream_errors: list = []

    async def on_message(message) -> None:
        if isinstance(message, Exception):
            stream_errors.append(message)

    async def main(errlog) -> Any:
        with anyio.fail_after(MCP_SCENARIO_TIMEOUT):
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, message_handler=on_message) as session:
                    init = await session.initialize()
                    client = McpClient(session, init, stream_errors)
                    return await scenario(client)

    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        result = anyio.run(main, errlog)
        errlog.seek(0)
        stderr = errlog.read()
    return McpRun(result, stream_errors, stderr)


class RawStdio:
    """A bare JSON-RPC client over the server's stdio, so a test holds the process (kill -9,
    resource limits through `command`) and can send any bytes as a frame."""

    def __init__(self, env: dict, cwd, command: list[str] | None = None) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 — lives as long as the process
        self.proc = subprocess.Popen(command or [sys.executable, "-m", "cpersona"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=env, cwd=cwd)
        self.next_id = 0

    def log(self) -> str:
        """What the server wrote to stderr so far."""
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")

    def send_frame(self, raw: bytes) -> None:
        """Write one line (`raw` + newline) as it is."""
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def reply(self) -> dict:
        """The next line the server writes, parsed (a test timeout guards a hang)."""
        line = self.proc.stdout.readline()
        assert line, "server closed stdout"
        return json.loads(line)

    def send(self, method: str, params: dict | None = None, notify: bool = False):
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.next_id += 1
            msg["id"] = self.next_id
        self.send_frame(json.dumps(msg).encode())
        if notify:
            return None
        while True:
            reply = self.reply()
            if reply.get("id") == msg["id"]:
                return reply

    def initialize(self) -> dict:
        """The MCP handshake; returns the initialize reply."""
        import mcp_types

        init = self.send("initialize", {"protocolVersion": mcp_types.LATEST_PROTOCOL_VERSION, "capabilities": {},
                                        "clientInfo": {"name": "raw-test", "version": "0"}})
        self.send("notifications/initialized", notify=True)
        return init

    def tool(self, name: str, arguments: dict) -> dict:
        reply = self.send("tools/call", {"name": name, "arguments": arguments})
        return json.loads(reply["result"]["content"][0]["text"])

    def close(self) -> int:
        """Close stdin (the server exits) and return its exit status."""
        self.proc.stdin.close()
        return self.proc.wait(30)


@pytest.fixture
def cli_db(tmp_path, monkeypatch) -> Path:
    """An in-process CLI run's environment: no CPERSONA_* / EMBEDDING_* variable of the
    caller, CPERSONA_DB_PATH = tmp_path/cli.db (not created), embeddings off."""
    for key in list(os.environ):
        if key.startswith(("CPERSONA_", "EMBEDDING_")):
            monkeypatch.delenv(key)
    db = tmp_path / "cli.db"
    monkeypatch.setenv("CPERSONA_DB_PATH", str(db))
    monkeypatch.setenv("CPERSONA_EMBEDDING_MODE", "none")
    return db


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without any CPERSONA_* / EMBEDDING_* variable (but with the update check
    off), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CPERSONA_", "EMBEDDING_"))}
    env.update(NO_UPDATE_CHECK)
    env.update(extra)
    return env


def assert_one_line_error(proc, needle: str) -> None:
    """A CLI run that failed the way users should see it: exit 2, exactly one stderr line
    containing `needle`, no traceback, nothing on stdout."""
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
