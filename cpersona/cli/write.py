"""Write commands for people, on the same service (and rules) as the MCP tools:

    cpersona store  "text" [--agent A] [--project P] [--channel C] [--lock] [--json]
    cpersona update mem:12 "corrected text" [--agent A] [--json]
    cpersona delete mem:12 | ep:3 [--agent A] [--json]
    cpersona lock   mem:12 [--agent A] [--json]     /   cpersona unlock mem:12 …

A row is named by its ref as `list` and `recall` print it (`mem:12`, `ep:3`) or by its
number (a memory). `--agent` is the ownership check of the MCP row tools: the change is
refused unless the row belongs to that agent. Exit 1 when the change is refused (not
found, locked, not owned) or the text rejected.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from typing import Any

from cpersona.cli.common import FAILED, OK, add_json_flag, console, fail, open_engine, print_json, wait_for_model
from cpersona.config import Settings

#: The service names the MCP tool that ends a refusal; the command line names its own command.
_TOOL_HINTS = ((re.compile(r"memory (\d+) is locked; call unlock_memory first"),
                r"memory \1 is locked; run `cpersona unlock mem:\1` first"),)


def for_the_cli(message: str) -> str:
    """A service error with its MCP tool hints replaced by the `cpersona` command to run."""
    for pattern, replacement in _TOOL_HINTS:
        message = pattern.sub(replacement, message)
    return message


def _report(args: argparse.Namespace, res: dict[str, Any], done: str) -> int:
    """Print `res` (JSON, or `done` / its error for people); 1 when the change failed."""
    failed = res.get("ok") is False
    if args.json:
        print_json(res)
    elif failed:
        fail(for_the_cli(res.get("error") or f"{res.get('result', 'refused')}: {res.get('reason', '')}"))
    else:
        console().print(done)
    return FAILED if failed else OK


def store_command(settings: Settings, args: argparse.Namespace) -> int:
    """Store one memory; prints its ref (or why it was skipped / rejected)."""
    engine = open_engine(settings, must_exist=False)
    try:
        agent = args.agent
        if agent is None:
            with engine.db.read() as s:
                known = s.agents.ids()
            if len(known) > 1:
                return fail("this database holds several agents; choose one with --agent: "
                            + ", ".join(map(repr, known)))
            agent = known[0] if known else ""
        wait_for_model(engine, quiet=args.json)
        res = dict(engine.store(agent, args.text, project_id=args.project or "", channel=args.channel or "",
                                lock=args.lock, source={"type": "User", "id": "cli",
                                                        "name": os.environ.get("USER", "")}))
        if res.get("result") == "skipped":
            done = f"skipped: {res['reason']}" + (f" (existing mem:{res['id']})" if "id" in res else "")
        else:
            note = "" if res.get("embedded") or engine.embedder is None else " (no vector yet: queued)"
            cut = " (cut to the length limit)" if res.get("truncated") else ""
            done = f"stored mem:{res.get('id')} for agent {agent!r}{note}{cut}"
        return _report(args, res, done)
    finally:
        engine.close()


def _row_command(settings: Settings, args: argparse.Namespace, change: Callable[[Any], dict[str, Any]],
                 done: str) -> int:
    engine = open_engine(settings)
    if engine is None:
        return fail(f"no database at {settings.db_file}")
    try:
        return _report(args, dict(change(engine)), done.format(ref=args.ref))
    finally:
        engine.close()


def _is_episode(ref: str) -> bool:
    return ref.strip().startswith("ep:")


def update_command(settings: Settings, args: argparse.Namespace) -> int:
    return _row_command(settings, args, lambda e: e.update_memory(args.ref, args.text, args.agent), "updated {ref}")


def delete_command(settings: Settings, args: argparse.Namespace) -> int:
    def delete(engine) -> dict[str, Any]:
        if _is_episode(args.ref):
            return dict(engine.delete_episode(args.ref, args.agent))
        return dict(engine.delete_memory(args.ref, args.agent))

    return _row_command(settings, args, delete, "deleted {ref}")


def lock_command(settings: Settings, args: argparse.Namespace) -> int:
    return _row_command(settings, args, lambda e: e.lock_memory(args.ref, args.agent), "locked {ref}")


def unlock_command(settings: Settings, args: argparse.Namespace) -> int:
    return _row_command(settings, args, lambda e: e.unlock_memory(args.ref, args.agent), "unlocked {ref}")


#: name → (help, handler, takes new text)
_ROW_COMMANDS = (
    ("update", "replace a memory's text (re-embedded, same id)", update_command, True),
    ("delete", "delete a memory (mem:N) or an episode (ep:N)", delete_command, False),
    ("lock", "protect a memory from update and delete", lock_command, False),
    ("unlock", "remove the protection of lock", unlock_command, False),
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register store, update, delete, lock and unlock."""
    p = sub.add_parser("store", help="keep one memory", description="Store one memory.")
    p.add_argument("text", help="the text to keep")
    p.add_argument("--agent", help="the agent (default: the only agent in the database)")
    p.add_argument("--project", help="project id (default '' = global pool)")
    p.add_argument("--channel", help="channel (default '' = every channel)")
    p.add_argument("--lock", action="store_true", help="lock the new memory at once")
    add_json_flag(p)
    p.set_defaults(func=store_command)
    for name, help_text, handler, takes_text in _ROW_COMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
        p.add_argument("ref", help="the row: mem:12 (or 12), ep:3" if name == "delete" else "the memory: mem:12 or 12")
        if takes_text:
            p.add_argument("text", help="the corrected full text")
        p.add_argument("--agent", help="refuse unless the row belongs to this agent")
        add_json_flag(p)
        p.set_defaults(func=handler)
