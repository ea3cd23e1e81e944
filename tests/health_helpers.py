"""Helpers of the health tests: write defects straight into the file (as another tool or
an old release would), and run one check through report → fix → report."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from cpersona.service.engine import Engine

from backends import PG_FILES, pg_rows


def path_of(engine: Engine) -> str:
    return engine.db.path


def raw(engine: Engine | str | Path, sql: str, params: tuple = ()) -> int:
    """Run one statement on the file with a private connection (on the PostgreSQL schema in
    a both-backends test); returns lastrowid (the new id of an INSERT)."""
    where = str(engine if not isinstance(engine, Engine) else path_of(engine))
    if where in PG_FILES:
        returning = " RETURNING id" if sql.lstrip().upper().startswith("INSERT") else ""
        found = pg_rows(PG_FILES[where], sql + returning, params)
        return int(found[0][0]) if returning and found else 0
    conn = sqlite3.connect(where, timeout=10)
    try:
        with conn:
            cur = conn.execute(sql, params)
        return int(cur.lastrowid or 0)
    finally:
        conn.close()


def rows(engine: Engine | str | Path, sql: str, params: tuple = ()) -> list[tuple]:
    where = str(engine if not isinstance(engine, Engine) else path_of(engine))
    if where in PG_FILES:
        return pg_rows(PG_FILES[where], sql, params)
    conn = sqlite3.connect(where, timeout=10)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def add_memory(engine: Engine, content: str, *, agent: str = "kai", locked: int = 0, **cols: Any) -> int:
    """Insert a memory row directly (the write path would refuse or clean the defect)."""
    values = {"agent_id": agent, "content": content, "timestamp": "2026-03-01T09:00:00+00:00", "locked": locked,
              **cols}
    names = ", ".join(values)
    marks = ", ".join("?" * len(values))
    return raw(engine, f"INSERT INTO memories ({names}) VALUES ({marks})", tuple(values.values()))


def memory(engine: Engine, memory_id: int) -> tuple | None:
    """The whole stored row (every column), or None."""
    found = rows(engine, "SELECT * FROM memories WHERE id = ?", (memory_id,))
    return found[0] if found else None


def find(report: dict, issue_type: str) -> list[dict]:
    return [i for i in report["issues"] if i["type"] == issue_type]


def one(report: dict, issue_type: str) -> dict:
    found = find(report, issue_type)
    assert len(found) == 1, report["issues"]
    return found[0]


def cycle(engine: Engine, check: str, issue_type: str, severity: str, locked: int = 0,
          **kwargs: Any) -> tuple[dict, dict, dict]:
    """Report → fix → report of one check. Asserts the defect is reported with `severity`
    and gone afterwards — except on the `locked` rows, which repairs never change: then
    only they are left, flagged for a person. Returns (issue before, issue of the fix run,
    report after)."""
    before = one(engine.check_health(checks=[check], **kwargs), issue_type)
    assert before["severity"] == severity, before
    fixed = engine.check_health(checks=[check], fix=True, **kwargs)
    assert fixed["fixed"] is True, fixed
    during = one(fixed, issue_type)
    after = engine.check_health(checks=[check], **kwargs)
    if locked:
        left = one(after, issue_type)
        assert left["locked"] == locked and left["repairable"] == 0 and left["needs_human_review"], left
        assert left.get("count", locked) == locked, left
    else:
        assert not find(after, issue_type), after["issues"]
    return before, during, after
