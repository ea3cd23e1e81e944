"""Host hooks (docs/memory-without-asking.md):

    cpersona hook <Event> [--agent ID]           what a host runs per event (host/hookrun.py)
    cpersona hooks install   --host claude-code|codex|agents-md [--scope user|project|local]
                             [--settings PATH] [--claude-md] [--agent ID] [--dry-run]
    cpersona hooks uninstall --host … [--scope …] [--settings PATH] [--claude-md] [--dry-run]
    cpersona hooks status    [--json]            what is installed; whether the server answers

`install --host claude-code` merges cpersona's hook commands (the absolute path of this
`cpersona`) into Claude Code's settings file — user: ~/.claude/settings.json, project:
.claude/settings.json (shared with the team: the path is yours), local:
.claude/settings.local.json — keeping every other key and hook; `--claude-md` also writes the
memory-policy snippet into CLAUDE.md. `--host codex` / `agents-md` write the snippet into
AGENTS.md (host/policy_snippet.py). Running it again changes nothing; each change is printed.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from cpersona.cli.common import FAILED, OK, USAGE, add_json_flag, fail, print_json
from cpersona.config import Settings
from cpersona.host import policy_snippet, settings_file
from cpersona.host.hookrun import log_path
from cpersona.util import local_channel
from cpersona.util.places import db_target

HOSTS = ("claude-code", "codex", "agents-md")
SCOPES = ("user", "project", "local")
#: Seconds `hooks status` waits for the server's answer.
STATUS_TIMEOUT_S = 3.0


def settings_path(scope: str, explicit: str | None, cwd: Path) -> Path:
    """Claude Code's settings file for `scope` (or the one given)."""
    if explicit:
        return Path(explicit).expanduser()
    if scope == "user":
        return policy_snippet.claude_dir() / "settings.json"
    return cwd / ".claude" / ("settings.local.json" if scope == "local" else "settings.json")


def _apply(path: Path, change: Any, dry_run: bool, what: str) -> list[str]:
    """Run change(old) -> (new, lines) on the file at `path`; write unless `dry_run`."""
    is_json = path.suffix == ".json"
    if is_json:
        old: Any = settings_file.read(path)
    else:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
    new, lines = change(old)
    if lines and not dry_run:
        if is_json:
            settings_file.write(path, new)
        elif new.strip():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(new, encoding="utf-8")
        else:
            path.unlink()
    prefix = "would change" if dry_run else "changed"
    return [f"{prefix} {path} ({what}): {line}" for line in lines] or [f"{path} ({what}): nothing to change"]


def _snippet_change(block: str | None):
    def change(text: str) -> tuple[str, list[str]]:
        new, changed = policy_snippet.upsert(text, block) if block else policy_snippet.remove(text)
        verb = "memory-policy snippet written" if block else "memory-policy snippet removed"
        return new, [verb] if changed else []

    return change


def _run(settings: Settings, args: argparse.Namespace, installing: bool) -> int:
    cwd = Path.cwd()
    agent = args.agent if installing else None
    lines: list[str] = []
    try:
        if args.host == "claude-code":
            start = settings_file.executable()
            path = settings_path(args.scope, args.settings, cwd)
            edit = (lambda s: settings_file.install(s, start, agent)) if installing else settings_file.uninstall
            lines += _apply(path, edit, args.dry_run, "Claude Code settings")
        if args.host != "claude-code" or args.claude_md:
            block = policy_snippet.snippet(agent or settings.hooks_agent_id, args.host == "claude-code") \
                if installing else None
            path = policy_snippet.target(args.host, args.scope, cwd)
            lines += _apply(path, _snippet_change(block), args.dry_run, "memory policy")
    except (ValueError, OSError) as err:
        return fail(str(err), USAGE)
    for line in lines:
        print(line)
    if installing and args.host == "claude-code" and args.scope == "project" and not args.dry_run:
        print("note: .claude/settings.json is shared with your team and now names your cpersona path; "
              "--scope local keeps it to you")
    return OK


def install_command(settings: Settings, args: argparse.Namespace) -> int:
    return _run(settings, args, True)


def uninstall_command(settings: Settings, args: argparse.Namespace) -> int:
    return _run(settings, args, False)


def _last_log_line() -> str:
    try:
        with open(log_path(), "rb") as f:
            f.seek(max(0, f.seek(0, 2) - 4096))
            lines = f.read().decode("utf-8", "replace").splitlines()
        return lines[-1] if lines else ""
    except OSError:
        return ""


def status_command(settings: Settings, args: argparse.Namespace) -> int:
    """What is installed where, whether each command's executable exists, whether the
    server answers on the local endpoint, and the hook log's last line."""
    cwd = Path.cwd()
    files: list[dict[str, Any]] = []
    for scope in SCOPES:
        path = settings_path(scope, None, cwd)
        try:
            found = settings_file.installed(settings_file.read(path))
            problem = ""
        except ValueError as err:
            found, problem = {}, str(err)
        files.append({"scope": scope, "path": str(path), "events": found, "problem": problem})
    target = db_target(settings.db_url, settings.db_path)
    try:
        answer = local_channel.ask_server(target.key, "status", {}, STATUS_TIMEOUT_S)
        server: dict[str, Any] = answer if answer is not None else {"ok": False, "error": "no server is running for "
                                                                    "this database (hooks answer in their own process, "
                                                                    "keyword only)"}
    except (OSError, TimeoutError) as err:
        server = {"ok": False, "error": f"the server did not answer: {err}"}
    out = {"settings_files": files, "database": target.label, "server": server, "log": log_path(),
           "last_log_line": _last_log_line(), "agent_id": settings.hooks_agent_id,
           "endpoint": local_channel.available() or ("on" if settings.local_endpoint else "off")}
    if args.json:
        print_json(out)
        return OK
    for f in files:
        events = ", ".join(sorted(f["events"])) or "none"
        print(f"{f['scope']:8} {f['path']}: {f['problem'] or 'cpersona hooks: ' + events}")
        missing = {start[0] for event, commands in f["events"].items() for c in commands
                   if (start := settings_file.start_of(c, event)) and not os.path.exists(start[0])}
        for exe in sorted(missing):
            print(f"         warning: {exe} does not exist (run `cpersona hooks install` again)")
    who = f"answers (pid {server['pid']}, {server['embedding']})" if server.get("ok") else server.get("error")
    print(f"database {target.label}: server {who}")
    print(f"hook log {log_path()}: {out['last_log_line'] or 'empty'}")
    return OK if any(f["events"] for f in files) else FAILED


def hook_help(settings: Settings, args: argparse.Namespace) -> int:
    """Reached only for `cpersona hook --help` (cli/__init__.py runs hooks before argparse)."""
    return OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hook", help="answer one host hook event (run by the host, reads its JSON on stdin)",
                       description="Answer one Claude Code hook event: JSON on stdin, context on stdout, exit 0 "
                                   "whatever happens (failures go to the hook log).")
    p.add_argument("event", choices=list(settings_file.EVENTS), help="the hook event")
    p.add_argument("--agent", help="agent_id (default CPERSONA_HOOKS_AGENT_ID)")
    p.set_defaults(func=hook_help)
    p = sub.add_parser("hooks", help="install / uninstall / show the host hooks",
                       description="Install cpersona's hooks into a host so memory works without being asked.")
    actions = p.add_subparsers(dest="action", metavar="action", required=True)
    for name, func, text in (("install", install_command, "add cpersona's hooks (idempotent)"),
                             ("uninstall", uninstall_command, "remove exactly cpersona's hooks")):
        q = actions.add_parser(name, help=text, description=text)
        q.add_argument("--host", choices=HOSTS, default="claude-code", help="the host (default claude-code)")
        q.add_argument("--scope", choices=SCOPES, default="user",
                       help="user (every project, default), project (shared .claude/settings.json) or local")
        q.add_argument("--settings", help="Claude Code settings file to change instead of the scope's")
        q.add_argument("--claude-md", action="store_true", help="claude-code: also the memory-policy snippet in "
                                                                 "CLAUDE.md")
        if name == "install":
            q.add_argument("--agent", help="agent_id the hooks and the snippet use (default CPERSONA_HOOKS_AGENT_ID)")
        q.add_argument("--dry-run", action="store_true", help="print what would change, change nothing")
        q.set_defaults(func=func)
    q = actions.add_parser("status", help="what is installed, whether the server answers")
    add_json_flag(q)
    q.set_defaults(func=status_command)
