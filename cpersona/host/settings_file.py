"""Claude Code's settings file and cpersona's hook entries in it.

The file is JSON: `{"hooks": {<Event>: [{"matcher"?: "…", "hooks": [{"type": "command",
"command": "…", "timeout"?: s, "async"?: bool}]}]}, …other keys}`. `install` adds one matcher
group per event holding cpersona's command, or updates cpersona's command where it already
is; `uninstall` removes exactly cpersona's commands (and the groups and event lists left
empty by that); every other key, event and command is kept as it was, in its order. A command
is cpersona's when its words hold `… cpersona hook <Event>` (any path to the executable, or
`python -m cpersona`). Both are pure functions over the parsed file; `read` / `write` do the
I/O (write: a temporary file renamed over the old one, the old file's mode kept).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class EventSpec:
    """How one event is registered: its matcher (None = the event takes none), timeout in
    seconds, and whether Claude Code may run it in the background."""

    matcher: str | None
    timeout: int
    background: bool = False


#: The events cpersona registers, in this order.
EVENTS: dict[str, EventSpec] = {
    "SessionStart": EventSpec("startup|resume|clear|compact", 15),
    "UserPromptSubmit": EventSpec(None, 10),
    "PreCompact": EventSpec("manual|auto", 60),
    "Stop": EventSpec(None, 60, background=True),
    "SessionEnd": EventSpec(None, 60),
}


def executable() -> list[str]:
    """The words that start this cpersona: the absolute path of the running `cpersona`
    command, else the one on PATH, else `<python> -m cpersona`."""
    argv0 = sys.argv[0] if sys.argv else ""
    name = os.path.basename(argv0)
    if name.startswith("cpersona") and not name.endswith(".py") and os.path.isfile(argv0):
        return [os.path.abspath(argv0)]
    found = shutil.which("cpersona")
    return [os.path.abspath(found)] if found else [os.path.abspath(sys.executable), "-m", "cpersona"]


def join(words: list[str]) -> str:
    """A command line the host's shell splits back into `words`."""
    return subprocess.list2cmdline(words) if os.name == "nt" else shlex.join(words)


def command_for(start: list[str], event: str, agent: str | None = None) -> str:
    return join([*start, "hook", event, *(["--agent", agent] if agent else [])])


def start_of(command: Any, event: str) -> list[str] | None:
    """The words before `hook <event>` when `command` is cpersona's hook command for `event`
    (the word before `hook` names cpersona: `/…/cpersona` or `-m cpersona`), else None."""
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command, posix=os.name != "nt")
    except ValueError:
        return None
    for i in range(1, len(words) - 1):
        if words[i] == "hook" and words[i + 1] == event \
                and os.path.basename(words[i - 1].strip('"')).startswith("cpersona"):
            return words[:i]
    return None


def ours(command: Any, event: str) -> bool:
    """Whether a hook command is cpersona's for `event`."""
    return start_of(command, event) is not None


def _entry(command: str, spec: EventSpec) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": command, "timeout": spec.timeout}
    if spec.background:
        hook["async"] = True
    group: dict[str, Any] = {"hooks": [hook]}
    if spec.matcher is not None:
        group = {"matcher": spec.matcher, **group}
    return group


def _groups(settings: dict[str, Any], event: str) -> list[Any]:
    hooks = settings.get("hooks")
    groups = hooks.get(event) if isinstance(hooks, dict) else None
    return groups if isinstance(groups, list) else []


def installed(settings: dict[str, Any]) -> dict[str, list[str]]:
    """cpersona's commands per event found in `settings`."""
    found: dict[str, list[str]] = {}
    for event in EVENTS:
        for group in _groups(settings, event):
            for hook in (group.get("hooks") or []) if isinstance(group, dict) else []:
                if isinstance(hook, dict) and ours(hook.get("command"), event):
                    found.setdefault(event, []).append(hook["command"])
    return found


def install(settings: dict[str, Any], start: list[str], agent: str | None = None
            ) -> tuple[dict[str, Any], list[str]]:
    """(new settings, what changed: one line per event). Raises ValueError when `hooks` (or
    an event's list) is not the JSON shape Claude Code reads — nothing is guessed."""
    out = deepcopy(settings)
    hooks = out.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError("the settings file's \"hooks\" is not an object")
    changes = []
    for event, spec in EVENTS.items():
        want = command_for(start, event, agent)
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ValueError(f"the settings file's hooks.{event} is not a list")
        mine = [h for g in groups if isinstance(g, dict) for h in g.get("hooks") or []
                if isinstance(h, dict) and ours(h.get("command"), event)]
        if not mine:
            groups.append(_entry(want, spec))
            changes.append(f"added {event}: {want}")
        elif any(h.get("command") != want for h in mine):
            for h in mine:
                h["command"] = want
            changes.append(f"updated {event}: {want}")
    return out, changes


def uninstall(settings: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(new settings, what changed): cpersona's commands removed (module doc)."""
    out = deepcopy(settings)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out, []
    changes = []
    for event in EVENTS:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept_groups.append(group)
                continue
            kept = [h for h in inner if not (isinstance(h, dict) and ours(h.get("command"), event))]
            changes += [f"removed {event}: {h['command']}" for h in inner if h not in kept]
            if kept or not inner:
                kept_groups.append({**group, "hooks": kept})
        if kept_groups:
            hooks[event] = kept_groups
        elif groups:
            del hooks[event]
    if not hooks and changes:
        del out["hooks"]
    return out, changes


def read(path: Path) -> dict[str, Any]:
    """The parsed settings file ({} when it does not exist). Raises ValueError when it is
    not a JSON object (the file is then left alone)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); fix it or pass another --settings") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


def write(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as indented JSON, atomically, keeping the old file's mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = path.stat().st_mode & 0o777
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)
