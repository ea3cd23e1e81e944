"""Memory for hosts without hooks of their own, and forgetting a hooked session:

    cpersona context [--query TEXT] [--budget N] [--agent ID] [--cwd DIR] [--project P] [--json]
    cpersona forget --session ID [--agent ID] [--json]

`context` prints the block a hook would add (service/context_block.py): with --query, the
memories recall's gate passes for it, best last; without, the session-start block (profile,
latest episodes, the project's memories) — nothing when nothing relates. `forget` deletes the
memories and the episode the hooks stored for a session (service/capture.py). Both ask the
server running for the database (the local endpoint) and otherwise answer in this process,
keyword only; stderr (`answered_by` in --json) says which — stdout holds only the block.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from cpersona.cli.common import FAILED, OK, add_json_flag, fail, print_json
from cpersona.config import Settings

#: Seconds to wait for the running server's answer.
TIMEOUT_S = 60.0


def _run(settings: Settings, op: str, request: dict[str, Any], json_out: bool,
         show: Callable[[dict[str, Any]], int]) -> int:
    """Ask for `op` (module doc), then print the answer as JSON or with `show` (its status)."""
    from cpersona.host.local import ask

    try:
        answer, who = ask(settings, op, request, TIMEOUT_S)
    except (OSError, TimeoutError) as err:
        return fail(f"the running server did not answer: {err}")
    if not answer.get("ok"):
        return fail(str(answer.get("error")))
    if json_out:
        print_json({**answer, "answered_by": who})
        return OK
    print(f"cpersona: answered by {who}", file=sys.stderr)
    return show(answer)


def _print_block(answer: dict[str, Any]) -> int:
    if answer.get("text"):
        print(answer["text"])
    return OK


def context_command(settings: Settings, args: argparse.Namespace) -> int:
    request: dict[str, Any] = {"query": args.query or "", "cwd": os.path.abspath(args.cwd or os.getcwd())}
    for key in ("budget", "agent", "project"):
        if getattr(args, key) is not None:
            request[key] = getattr(args, key)
    return _run(settings, "context", request, args.json, _print_block)


def forget_command(settings: Settings, args: argparse.Namespace) -> int:
    def show(answer: dict[str, Any]) -> int:
        print(f"deleted {answer['deleted_memories']} memories and {answer['deleted_episodes']} episodes of session "
              f"{args.session}")
        if answer.get("kept"):
            print(f"kept (locked: unlock them first): {', '.join(answer['kept'])}")
        if answer.get("paused"):
            return fail("persistence is paused: nothing more was deleted (resume_persistence, then run it again)")
        return FAILED if answer.get("kept") else OK

    request: dict[str, Any] = {"session": args.session, **({"agent": args.agent} if args.agent else {})}
    return _run(settings, "forget", request, args.json, show)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("context", help="the memory block a hook would add (for any host)",
                       description="Print stored memory for a prompt (--query) or for the start of a session, "
                                   "within a token budget; nothing when nothing relates.")
    p.add_argument("--query", help="the prompt (default: the session-start block)")
    p.add_argument("--budget", type=int, help="most tokens (UTF-8 bytes / 3; default CPERSONA_HOOKS_PROMPT_TOKENS or "
                                              "CPERSONA_HOOKS_SESSION_TOKENS)")
    p.add_argument("--agent", help="agent_id (default CPERSONA_HOOKS_AGENT_ID)")
    p.add_argument("--cwd", help="working directory whose project to use (default: this one)")
    p.add_argument("--project", help="project id (default: from the working directory)")
    add_json_flag(p)
    p.set_defaults(func=context_command)
    p = sub.add_parser("forget", help="delete what the hooks stored for one session",
                       description="Delete the memories and the episode the hooks stored for a session.")
    p.add_argument("--session", required=True, help="the host's session id")
    p.add_argument("--agent", help="agent_id (default CPERSONA_HOOKS_AGENT_ID)")
    add_json_flag(p)
    p.set_defaults(func=forget_command)
