"""`cpersona config`: the effective settings and where each came from.

    cpersona config [--changed] [--json]

One row per setting of `cpersona/config.py`: the variable, the value in effect, and its
source — `default`, `env <VARIABLE>` or `file <path>` (the settings file). Secrets (the
HTTP bearer token) are shown as `***`. `--changed` lists only the settings not at their
default.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from cpersona.cli.common import OK, add_json_flag, console, print_json, table
from cpersona.config import CONFIG_FILE_ENV, SETTINGS, Settings, default_config_file

#: Settings whose values are never printed.
SECRETS = frozenset({"auth_token"})


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
                    "settings": rows})
        return OK
    out = table(title="Effective settings (env wins over the settings file, the file over the default)")
    for name in ("variable", "value", "source"):
        out.add_column(name, no_wrap=name != "value")
    for r in rows:
        out.add_row(r["variable"], repr(r["value"]) if isinstance(r["value"], str) else str(r["value"]),
                    r["source"])
    printer = console()
    printer.print(out if rows else "every setting is at its default")
    exists = "" if os.path.isfile(os.path.expanduser(settings_file)) else " (absent)"
    printer.print(f"settings file: {settings_file}{exists}; database: {resolved.db_file or resolved.db_path}")
    return OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="the effective settings and where each came from",
                       description="Show every setting's value in effect and its source: default, environment "
                                   "variable, or the settings file.")
    p.add_argument("--changed", action="store_true", help="only the settings not at their default")
    add_json_flag(p)
    p.set_defaults(func=config_command)
