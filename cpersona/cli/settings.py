"""`cpersona config`: the effective settings and where each came from.

    cpersona config [--changed] [--json]

One row per setting of `cpersona/config.py`: the variable, the value in effect, and its
source — `default`, `env <VARIABLE>` or `file <path>` (the settings file). Secrets (the
HTTP bearer token) are shown as `***`. `--changed` lists only the settings not at their
default.
"""

from __future__ import annotations

import argparse
import difflib
import os
from collections.abc import Mapping
from typing import Any

from cpersona.cli.common import OK, add_json_flag, console, print_json, table
from cpersona.config import CONFIG_FILE_ENV, SETTINGS, Settings, default_config_file

#: Settings whose values are never printed.
SECRETS = frozenset({"auth_token"})


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """One note per `CPERSONA_*` variable of `environ` (default `os.environ`) that no setting
    reads — a misspelling would otherwise be ignored silently —, with the nearest setting
    name when one is close (difflib ratio ≥ 0.8), e.g. "CPERSONA_RECAL_MODE is not a setting
    (did you mean CPERSONA_RECALL_MODE?)". Sorted by name; [] when every name is known."""
    env = os.environ if environ is None else environ
    known = {s.env for s in SETTINGS} | {CONFIG_FILE_ENV}
    notes = []
    for name in sorted(n for n in env if n.startswith("CPERSONA_") and n not in known):
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        notes.append(f"{name} is not a setting" + (f" (did you mean {near[0]}?)" if near else "; it is ignored"))
    return notes


def effective(settings: Settings, sources: dict[str, str]) -> list[dict[str, Any]]:
    """[{variable, value, source}] in declaration order (secrets masked)."""
    rows = []
    for s in SETTINGS:
        value = getattr(settings, s.field)
        rows.append({"variable": s.env, "value": "***" if s.field in SECRETS and value else value,
                     "source": sources.get(s.field, "default")})
    return rows


def config_command(settings: Settings, args: argparse.Namespace) -> int:
    """Print the effective settings. The settings are resolved again here to know sources."""
    resolved, sources = Settings.resolve()
    rows = effective(resolved, sources)
    if args.changed:
        rows = [r for r in rows if r["source"] != "default"]
    settings_file = os.environ.get(CONFIG_FILE_ENV, "").strip() or str(default_config_file())
    if args.json:
        print_json({"settings_file": settings_file, "database": str(resolved.db_file or resolved.db_path),
                    "settings": rows, "unknown_variables": unknown_variables()})
        return OK
    out = table(title="Effective settings (env wins over the settings file, the file over the default)")
    for name in ("variable", "value", "source"):
        out.add_column(name, no_wrap=name == "variable", overflow="fold")
    for r in rows:
        out.add_row(r["variable"], repr(r["value"]) if isinstance(r["value"], str) else str(r["value"]),
                    r["source"])
    printer = console()
    printer.print(out if rows else "every setting is at its default")
    exists = "" if os.path.isfile(os.path.expanduser(settings_file)) else " (absent)"
    printer.print(f"settings file: {settings_file}{exists}", soft_wrap=True)
    printer.print(f"database: {resolved.db_file or resolved.db_path}", soft_wrap=True)
    for note in unknown_variables():
        printer.print(f"[yellow]warning:[/yellow] {note}", soft_wrap=True)
    return OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="the effective settings and where each came from",
                       description="Show every setting's value in effect and its source: default, environment "
                                   "variable, or the settings file.")
    p.add_argument("--changed", action="store_true", help="only the settings not at their default")
    add_json_flag(p)
    p.set_defaults(func=config_command)
