"""`cpersona checkup` (also `python -m cpersona.checkup`): check a database file for cron
jobs and people. Report-only unless --fix (no migration, no file created).

Exit status: 2 when any critical issue remains or the check could not run (the reason on
stderr, never a traceback); 1 with --strict when a warning remains; else 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from cpersona.config import Settings
from cpersona.errors import CPersonaError

#: Longest line printed for one issue or one deep finding.
LINE_CHARS = 400


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "checkup", help="check the database file (report; --fix repairs); exit 2 = critical, 1 = warn with --strict",
        description="Integrity checks of a cpersona database (check_health), optionally deep_check per agent. "
                    "Report-only by default: the file is opened read-only and never migrated or created.")
    p.add_argument("--db", metavar="PATH", help="database file (must exist; default: CPERSONA_DB_PATH)")
    p.add_argument("--agent", metavar="ID", default="", help="only this agent's rows (default: every agent)")
    p.add_argument("--fix", action="store_true", help="apply the repairs (opens the file as the server does)")
    p.add_argument("--strict", action="store_true", help="exit 1 when a warning remains")
    p.add_argument("--deep", action="store_true", help="also deep_check each agent (or --agent)")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(func=checkup)


def exit_code(report: dict[str, Any], strict: bool) -> int:
    """2 on any critical issue, 1 on any warning when strict, else 0."""
    summary = report.get("severity_summary") or {}
    if summary.get("critical"):
        return 2
    return 1 if strict and summary.get("warn") else 0


def _fields(item: dict[str, Any], skip: tuple[str, ...]) -> str:
    text = json.dumps({k: v for k, v in item.items() if k not in skip}, ensure_ascii=False, default=str)
    return text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 1] + "…"


def _deep_lines(deep: dict[str, Any]) -> list[str]:
    """A line saying what ran (so a clean deep run is visible), then the findings worth a line:
    a count or pairs above zero, an error, a status other than ok."""
    if not deep:
        return []
    checks = {name for body in deep.values() for name in body.get("results", {})}
    found: list[str] = []
    lines = [f"  deep_check: {len(checks)} checks on {len(deep)} agent{'s' if len(deep) != 1 else ''}"]
    for agent, body in deep.items():
        for name, result in body.get("results", {}).items():
            notable = (result.get("count") or result.get("pairs") or result.get("recoverable") or "error" in result
                       or result.get("status") not in (None, "ok", "not_applicable"))
            if notable:
                found.append(f"  deep {agent or '(empty agent id)'} {name}: {_fields(result, ())}")
    return lines + (found or ["  deep_check: nothing found"])


def render(report: dict[str, Any], db: str, code: int, strict: bool) -> str:
    """The text report: summary line, one line per issue, skipped checks, deep findings, exit."""
    s = report.get("severity_summary", {})
    issues = report.get("issues", [])
    left = any(i.get("severity") in ("warn", "critical") for i in issues)  # info findings need nothing
    done = " (fix applied)" if any(i.get("fixed") for i in issues) else \
        " (nothing --fix could repair)" if left else " (nothing to repair)"
    fixed = done if report.get("fixed") else ""
    total = report.get("total_memories")
    lines = [f"{db}: {'?' if total is None else total} memories — critical {s.get('critical', 0)}, warn "
             f"{s.get('warn', 0)}, info {s.get('info', 0)} — {report.get('status')}{fixed}"]
    if "error" in report.get("stats", {}):
        lines.append(f"  statistics unavailable: {report['stats']['error']}")
    if report.get("repairs_skipped"):
        lines.append(f"  repairs skipped: {report.get('repairs_skip_reason')}")
    if report.get("database_damage"):
        lines.append(f"  database damage: {report['database_damage']}")
    lines += [f"  [{i['severity']}] {i['type']}: {_fields(i, ('type', 'severity'))}" for i in report.get("issues", [])]
    lines += [f"  [skipped] {k['check']}: {k['reason']}" for k in report.get("skipped", [])]
    lines += _deep_lines(report.get("deep", {}))
    if report.get("deep_not_fixed"):
        lines.append(f"  {report['deep_not_fixed']}")
    lines.append(f"exit={code} ({'strict' if strict else 'non-strict'} gate)")
    return "\n".join(lines)


def _database(settings: Settings, given: str | None) -> str:
    """The file to check: --db, else CPERSONA_DB_PATH / the default (announced on stderr).
    Raises FileNotFoundError when it does not exist (a checkup never creates one)."""
    path = Path(given or settings.db_path).expanduser().resolve()
    if not given:
        print(f"cpersona checkup: database {path}", file=sys.stderr)
    if not path.is_file():
        raise FileNotFoundError(f"no database file at {path}")
    return str(path)


def checkup(settings: Settings, args: argparse.Namespace) -> int:
    """Run the checkup and print the report; returns the exit status."""
    from cpersona.service.checkup import run_checkup

    try:
        db = _database(settings, args.db)
        report = run_checkup(settings.model_copy(update={"db_path": db}), args.agent, args.fix, args.deep)
    except Exception as err:  # noqa: BLE001 — any failure is exit 2 with one line, never a traceback
        named = isinstance(err, (CPersonaError, OSError))  # our own message says what happened
        print(f"cpersona checkup: {err if named else f'{type(err).__name__}: {err}'}", file=sys.stderr)
        return 2
    code = exit_code(report, args.strict)
    if args.json:
        out = {**report, "checkup": {"db": db, "exit_code": code, "gate": "strict" if args.strict else "non-strict"}}
        print(json.dumps(out, ensure_ascii=False, indent=1, default=str))
    else:
        print(render(report, db, code, args.strict))
    return code
