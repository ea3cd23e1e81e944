"""`cpersona hook <Event> [--agent ID]`: the command a host runs for each hook event. It
must never slow or break the host, so:

* the fast path imports only the standard library, `platformdirs` and cpersona's stdlib-only
  helpers (util/places.py, util/local_channel.py) — no pydantic, numpy or mcp: it reads the
  hook's JSON from stdin, asks the server running for the database (the local endpoint), and
  prints its answer;
* with no server running, the cold path answers in this process on a keyword-only engine
  (host/local.py: no embedding model is loaded);
* whatever happens it exits 0; on any failure it prints nothing on stdout and writes one
  line to the hook log (`hooks.log` in the per-user state directory, kept under LOG_MAX_BYTES
  by moving it to `hooks.log.1`). Each answered event also logs one line (counts only: what
  was stored, how many secrets were redacted — never a text).

`cli/__init__.py` dispatches `cpersona hook …` here before the rest of the CLI is imported.
"""

from __future__ import annotations

import json
import os
import sys
import time

from cpersona.host import READ_EVENTS
from cpersona.util import local_channel
from cpersona.util.places import resolve_db_target, state_dir

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook client starts lean)
if TYPE_CHECKING:
    from typing import Any

#: Seconds the hook waits for the running server's answer, per event (a server that took the
#: request but did not answer by then: nothing is printed and the hook log says so).
TIMEOUTS = {"SessionStart": 8.0, "UserPromptSubmit": 5.0, "PreCompact": 55.0, "Stop": 55.0, "SessionEnd": 55.0}
DEFAULT_TIMEOUT = 10.0
#: Largest hook input read from stdin, in bytes (Claude Code's is a few KB: the prompt).
MAX_INPUT = 16 * 1024 * 1024
LOG_NAME = "hooks.log"
LOG_MAX_BYTES = 1024 * 1024


def log_path() -> str:
    return os.path.join(state_dir(), LOG_NAME)


def log_line(text: str) -> None:
    """Append one line to the hook log (never raises: a log that cannot be written is skipped)."""
    try:
        path = log_path()
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        if os.path.exists(path) and os.path.getsize(path) > LOG_MAX_BYTES:
            os.replace(path, path + ".1")
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        one = " ".join(text.split())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(f"{stamp} pid {os.getpid()} {one}\n")
    except OSError:
        pass


def ask(op: str, args: dict[str, Any], timeout: float) -> tuple[dict[str, Any], str]:
    """(answer, who answered) — the server running for the database, else this process."""
    target = resolve_db_target()
    answer = local_channel.ask_server(target.key, op, args, timeout)
    if answer is not None:
        return answer, "server"
    if op == "hook" and args.get("event") in READ_EVENTS and not target.url and target.path != ":memory:" \
            and not os.path.exists(target.path):
        return {"ok": True, "output": "", "note": f"{args['event']}: no database at {target.path} yet"}, "no server"
    _log_to_file()
    from cpersona.host.local import answer_here  # the cold path: pydantic, numpy, the engine

    return answer_here(op, args), "this process (keyword only)"


def _log_to_file() -> None:
    """Send the cold path's Python logging to the hook log, not to the host's stderr."""
    import logging

    try:
        os.makedirs(os.path.dirname(log_path()), mode=0o700, exist_ok=True)
        logging.basicConfig(filename=log_path(), level=logging.WARNING,
                            format="%(asctime)s pid %(process)d %(name)s: %(message)s")
    except OSError:
        logging.basicConfig(handlers=[logging.NullHandler()])


def _arguments(argv: list[str]) -> tuple[str, str | None]:
    event, agent = (argv[0] if argv else ""), None
    rest = argv[1:]
    if len(rest) == 2 and rest[0] == "--agent":
        agent = rest[1]
    elif rest:
        raise ValueError(f"usage: cpersona hook <Event> [--agent ID]; got {' '.join(argv)!r}")
    return event, agent


def main(argv: list[str]) -> int:
    """Run one hook (module doc). Always returns 0."""
    started = time.monotonic()
    event = argv[0] if argv else "?"
    try:
        event, agent = _arguments(argv)
        raw = sys.stdin.buffer.read(MAX_INPUT + 1)
        if len(raw) > MAX_INPUT:
            raise ValueError(f"hook input larger than {MAX_INPUT} bytes")
        data = json.loads(raw or b"{}")
        args: dict[str, Any] = {"event": event, "input": data, **({"agent": agent} if agent else {})}
        answer, who = ask("hook", args, TIMEOUTS.get(event, DEFAULT_TIMEOUT))
        took = f"{(time.monotonic() - started) * 1000:.0f} ms"
        if not answer.get("ok"):
            log_line(f"{event}: failed ({who}, {took}): {answer.get('error')}")
            return 0
        output = answer.get("output") or ""
        if output:
            sys.stdout.write(output + "\n")
            sys.stdout.flush()
        log_line(f"{answer.get('note') or event} ({who}, {took})")
    except BaseException as err:  # noqa: BLE001 — a hook must never fail its host: logged, exit 0
        log_line(f"{event}: failed: {type(err).__name__}: {err}")
    return 0
