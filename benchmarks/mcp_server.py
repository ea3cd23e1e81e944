"""The server under test, as an MCP client sees it: `McpServer` spawns the real
`python -m cpersona` over stdio with the official MCP client; `call()` returns the parsed
JSON result and the client-side wall time. Also the server process's pid (the child of this
process whose cmdline mentions cpersona) and its peak RSS (VmHWM) from /proc."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm may contain spaces/parentheses: the fields after the LAST ')' are fixed.
    return int(stat.rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def server_children(parent: int | None = None) -> set[int]:
    """Pids of live children of `parent` (default: this process) whose cmdline mentions
    cpersona — i.e. the MCP servers this benchmark spawned. Linux /proc only."""
    parent = os.getpid() if parent is None else parent
    found = set()
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit() and _ppid(int(entry.name)) == parent and "cpersona" in _cmdline(int(entry.name)):
            found.add(int(entry.name))
    return found


def proc_memory_mb(pid: int | None) -> dict[str, float | None]:
    """{peak_rss_mb (VmHWM), rss_mb (VmRSS)} of `pid` plus its cpersona children (the
    embedding worker process) from /proc/<pid>/status; each process's peak summed."""
    out: dict[str, float | None] = {"peak_rss_mb": None, "rss_mb": None}
    if pid is None:
        return out
    for one in (pid, *sorted(server_children(pid))):
        try:
            for line in Path(f"/proc/{one}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    name = "peak_rss_mb" if key == "VmHWM" else "rss_mb"
                    out[name] = round((out[name] or 0.0) + int(value.split()[0]) / 1024, 1)
        except OSError:
            pass
    return out


def proc_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds so far of `pid`, every thread, plus its live cpersona
    children (the embedding worker process) (/proc/<pid>/stat); None if unreadable."""
    if pid is None:
        return None
    total = None
    for one in (pid, *sorted(server_children(pid))):
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total = (total or 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


# ---------------------------------------------------------------------------- MCP
class ToolError(RuntimeError):
    """The MCP call itself failed (protocol error / isError result), not `ok: false`."""


class McpServer:
    """`python -m cpersona` over stdio via the official MCP client (async context manager).

    Args:
        db_path: the SQLite file (CPERSONA_DB_PATH), normally in a temp folder.
        embedding: CPERSONA_EMBEDDING_MODE (none | local | http).
        embedding_url: CPERSONA_EMBEDDING_URL for http mode.
        errlog: file receiving the server's stderr (kept for the report).
        env: extra variables; every CPERSONA_* of this process is passed through as well
            (ours win for DB path / mode / URL).
        command: the server's command line (default: this interpreter's `-m cpersona`; the
            original CPersona's console script for a comparison).

    Attributes after entering: `pid` (server process, or None if not found), `init_ms`.
    """

    def __init__(self, db_path: Path, embedding: str, embedding_url: str = "", errlog: Path | None = None,
                 env: dict[str, str] | None = None, timeout_s: float = 300.0,
                 command: Sequence[str] = (sys.executable, "-m", "cpersona")) -> None:
        self.db_path = Path(db_path)
        self.command = list(command)
        self.env = {k: v for k, v in os.environ.items() if k.startswith("CPERSONA_")}
        self.env.update(env or {})
        self.env.update({"CPERSONA_DB_PATH": str(self.db_path), "CPERSONA_EMBEDDING_MODE": embedding})
        if embedding_url:
            self.env["CPERSONA_EMBEDDING_URL"] = embedding_url
        self.errlog_path = errlog or self.db_path.with_suffix(".stderr.log")
        self.timeout_s = timeout_s
        self.pid: int | None = None
        self.init_ms = 0.0
        self._stack: contextlib.AsyncExitStack | None = None
        self._session = None

    def knobs(self) -> dict[str, str]:
        """The extra environment the server ran with (CPERSONA_* and --server-env; an auth
        token is masked)."""
        return {k: ("***" if "TOKEN" in k else v) for k, v in sorted(self.env.items())}

    async def __aenter__(self) -> McpServer:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=self.command[0], args=self.command[1:], env=self.env, cwd=str(self.db_path.parent),
        )
        before = server_children()
        self._stack = contextlib.AsyncExitStack()
        await self._stack.__aenter__()
        try:
            errlog = self._stack.enter_context(self.errlog_path.open("a", encoding="utf-8"))
            read, write = await self._stack.enter_async_context(stdio_client(params, errlog=errlog))
            self._session = await self._stack.enter_async_context(ClientSession(read, write))
            started = time.perf_counter()
            await self._session.initialize()
            self.init_ms = (time.perf_counter() - started) * 1000
        except BaseException:
            self._report_startup_failure()
            await self._stack.__aexit__(*sys.exc_info())
            raise
        new = sorted(server_children() - before)
        self.pid = new[-1] if new else None
        return self

    def _report_startup_failure(self, tail: int = 15) -> None:
        """The server died before answering `initialize`: show why (its stderr)."""
        try:
            lines = self.errlog_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        print(f"cpersona server failed to start ({' '.join(self.command)}); last stderr lines:", file=sys.stderr)
        for line in lines[-tail:] or ["(no stderr output)"]:
            print("  | " + line, file=sys.stderr)

    async def __aexit__(self, *exc) -> None:
        if self._stack is not None:
            await self._stack.__aexit__(*exc)

    def memory(self) -> dict[str, float | None]:
        """Peak / current RSS of the server process (call while it is alive)."""
        return proc_memory_mb(self.pid)

    async def call(self, tool: str, arguments: dict) -> tuple[dict, float]:
        """Call `tool`; returns (parsed JSON of the first text block, client wall ms)."""
        started = time.perf_counter()
        result = await self._session.call_tool(tool, arguments, read_timeout_seconds=self.timeout_s)
        elapsed = (time.perf_counter() - started) * 1000
        content = getattr(result, "content", None) or []
        text = getattr(content[0], "text", "") if content else ""
        if getattr(result, "is_error", False):
            raise ToolError(f"{tool}: {text or result!r}")
        try:
            payload = json.loads(text)
        except ValueError:
            raise ToolError(f"{tool}: result is not JSON: {text[:200]!r}") from None
        return payload, elapsed

    def stderr_summary(self, limit: int = 20) -> dict[str, Any]:
        """Warnings/errors the server logged (counts + the first `limit` such lines)."""
        try:
            lines = self.errlog_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        flagged = [ln for ln in lines if any(w in ln for w in ("ERROR", "WARNING", "CRITICAL", "Traceback"))]
        return {"lines": len(lines), "flagged": len(flagged), "first": flagged[:limit]}
