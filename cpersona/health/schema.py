"""Checks on the file and its schema: SQLite's quick_check, the FTS5 indexes, the recorded
schema version, the msg_id dedup index, the canonical indexes and triggers, and whether a
file written by another release still awaits our migration.

Schema objects are compared after normalisation (case, quotes, whitespace, IF NOT EXISTS),
so a file created by the original release with differently formatted DDL is not drift.
"""

from __future__ import annotations

import re
from typing import Any

from cpersona.errors import CheckNeedsWrite, DatabaseBusy, StatementTimeout
from cpersona.health.model import Context, Issue, NotApplicable, sample
from cpersona.storage import schema

#: Memories kept out of quick_check's message list.
QUICK_CHECK_MESSAGES = 10
_DEDUP_MSG_ID = "idx_memories_dedup_msg_id"
_DEDUP_CONTENT = "idx_memories_dedup_content"
#: Our additions to the original's schema: (table, column) and objects a migration adds.
_OUR_COLUMNS = (("pending_memory_tasks", "status"),)
_OUR_OBJECTS = frozenset({"idx_pending_tasks_embed"})
#: FTS table each sync trigger feeds.
_TRIGGER_FTS = {name: "memories_fts" if name.startswith("memories") else "episodes_fts" for name in schema.FTS_TRIGGERS}
_TRIGGER_FTS.update(dict.fromkeys(schema.WORD_TRIGGERS, "memories_words"))


def normalise_ddl(sql: str) -> str:
    """DDL reduced to what matters: lower case, no quotes, no IF NOT EXISTS, single spaces,
    no spaces around punctuation."""
    text = re.sub(r"[\"'`\[\]]", "", sql.lower())
    text = re.sub(r"\bif\s+not\s+exists\b", " ", text)
    text = re.sub(r"\s+", " ", text)
    return re.sub(r"\s*([(),;=<>])\s*", r"\1", text).strip()


# ----------------------------------------------------------------- integrity
def detect_integrity(ctx: Context) -> list[Issue]:
    messages = ctx.s.integrity.quick_check(QUICK_CHECK_MESSAGES)
    if messages == ["ok"]:
        return []
    return [{"messages": messages, "hint": "the file is damaged: stop writers, keep a copy of the file (with its "
             "-wal), then restore a backup or rebuild from an export (export_memories)"}]


# ----------------------------------------------------------------------- FTS
def _fts_tables(ctx: Context) -> list[str]:
    if not ctx.settings.fts_enabled:
        raise NotApplicable("full-text search is disabled (CPERSONA_FTS_ENABLED=false)")
    return [*schema.FTS_TABLES, *schema.WORD_TABLES]


def detect_fts(ctx: Context) -> list[Issue]:
    out: list[Issue] = []
    missing = [t for t in _fts_tables(ctx) if not ctx.s.integrity.has_table(t)]
    unavailable = [t for t in missing if t in schema.FTS_TABLES]  # a missing word index awaits our migration
    if unavailable:
        out.append({"type": "fts_unavailable", "severity": "warn", "tables": unavailable, "fixable": False,
                    "reason": "the FTS5 tables are missing: keyword search falls back to LIKE",
                    "hint": "open the file with a cpersona whose SQLite has FTS5 (it creates and fills them)"})
    with ctx.fts_session() as s:
        for table in _fts_tables(ctx):
            if table in missing:
                continue
            try:
                problem = s.integrity.fts_problem(table, None if ctx.writing else ctx.lock_limit)
            except StatementTimeout:
                out.append(_not_checked(table, ctx.lock_limit))
                continue
            except CheckNeedsWrite as err:
                out.append(_read_only(table, err))
                continue
            except DatabaseBusy as err:
                out.append(_busy(table, err))
                continue
            if problem:
                out.append({"severity": "critical", "table": table, "detail": problem, "repairable": 1})
    return out


def _not_checked(table: str, seconds: float | None) -> Issue:
    return {"type": "fts_not_checked", "severity": "info", "table": table, "fixable": False,
            "reason": f"FTS5's integrity-check holds the file's write lock; a report stops it after {seconds:g} s "
                      "so that writers never wait past their busy timeout",
            "hint": "run check_health(fix=true) or `cpersona checkup --fix` at a quiet moment: it checks "
                    "without a time limit"}


def _busy(table: str, err: DatabaseBusy) -> Issue:
    return {"type": "fts_not_checked", "severity": "info", "table": table, "fixable": False,
            "reason": f"FTS5's integrity-check runs as a write and {err} — not a finding about the index",
            "hint": "run check_health again when the other writer is done"}


def _read_only(table: str, err: CheckNeedsWrite) -> Issue:
    return {"type": "fts_not_checked", "severity": "info", "table": table, "fixable": False,
            "reason": f"FTS5's integrity-check runs as a write and {err}",
            "hint": "check a writable copy (cpersona backup, then checkup on the copy)"}


def fix_fts(ctx: Context, issue: Issue) -> dict[str, Any]:
    table = issue["table"]
    error = ctx.s.integrity.fts_rebuild(table)
    if error:
        return {"fixed": False, "fix_error": error}
    problem = ctx.s.integrity.fts_problem(table)
    return {"fixed": not problem, **({"fix_error": f"still failing after rebuild: {problem}"} if problem else {})}


# -------------------------------------------------------------------- version
def detect_version(ctx: Context) -> list[Issue]:
    version = ctx.s.integrity.schema_version()
    if version == schema.SCHEMA_VERSION:
        return []
    if version is not None and version > schema.SCHEMA_VERSION and ctx.s.integrity.original_opened_as_is(version):
        return []  # the original's 2.6 line: its own tables around v13, opened in place
    if version is None:
        why = "no schema_version table: not a cpersona database, or an interrupted first start"
    elif version > schema.SCHEMA_VERSION:
        why = (f"written by a newer release (schema v{version}); this cpersona reads v{schema.SCHEMA_VERSION} and "
               "will not open it for writing")
    else:
        why = f"an older schema (v{version}); opening the file with the server migrates it"
    return [{"found": version, "expected": schema.SCHEMA_VERSION, "reason": why}]


def detect_migration(ctx: Context) -> list[Issue]:
    """A file written by another release that the server has not opened yet."""
    integrity = ctx.s.integrity
    missing = [f"{t}.{c}" for t, c in _OUR_COLUMNS if integrity.has_table(t) and not integrity.has_column(t, c)]
    missing += [t for t in ("cpersona_meta", *schema.WORD_TABLES) if not integrity.has_table(t)]
    missing += [n for n in sorted(_OUR_OBJECTS) if integrity.object_sql("index", n) is None]
    if not missing:
        return []
    return [{"missing": missing, "reason": "written by another release and not opened by this server yet; "
             "the server (or `cpersona checkup --fix`) adds these on open, nothing is lost"}]


# ------------------------------------------------------------ msg_id index
def detect_msg_id_index(ctx: Context) -> list[Issue]:
    if ctx.s.integrity.object_sql("index", _DEDUP_MSG_ID) is not None:
        return []
    rows = ctx.s.integrity.msg_id_collisions()
    locked = [r[0] for r in rows if r[1]]
    out: Issue = {"index": _DEDUP_MSG_ID, "colliding": len(rows), "locked": len(locked),
                  "repairable": 0 if locked else len(rows) + 1, "ids": sample([r[0] for r in rows])}
    if locked:
        out["reason"] = "locked memories share a message id; unlock or delete one of each pair first"
    return [out]


def fix_msg_id_index(ctx: Context, issue: Issue) -> dict[str, Any]:
    rows = ctx.s.integrity.msg_id_collisions()
    if any(locked for _, locked in rows):
        return {"fixed": False, "fix_error": "locked memories share a message id; nothing was changed"}
    blanked = sum(ctx.s.integrity.blank_msg_id(row_id) for row_id, _ in rows)
    error = ctx.s.integrity.replace_object("index", _DEDUP_MSG_ID, schema.UNIQUE_INDEXES[_DEDUP_MSG_ID])
    return {"fixed": not error, "msg_ids_blanked": blanked, **({"fix_error": error} if error else {})}


# ------------------------------------------------------------- schema objects
def canonical_objects(ctx: Context) -> list[tuple[str, str, str, str]]:
    """(kind, name, DDL, severity) of every index and trigger the schema defines."""
    objects = [("index", n, ddl, "warn") for n, ddl in schema.INDEXES.items()]
    objects += [("index", n, ddl, "critical") for n, ddl in schema.UNIQUE_INDEXES.items()]
    if ctx.settings.fts_enabled and ctx.s.integrity.has_table("memories_fts"):
        objects += [("trigger", n, ddl, "critical") for n, ddl in schema.FTS_TRIGGERS.items()]
    if ctx.settings.fts_enabled and ctx.s.integrity.has_table("memories_words"):
        objects += [("trigger", n, ddl, "critical") for n, ddl in schema.WORD_TRIGGERS.items()]
    if ctx.s.integrity.has_table("entities"):  # the declared graph: no declaration may outlive what it names
        objects += [("index", n, ddl, "warn") for n, ddl in schema.ASSOCIATION_INDEXES.items()]
        objects += [("trigger", n, ddl, "critical") for n, ddl in schema.ASSOCIATION_TRIGGERS.items()]
    return objects


def _drift(ctx: Context) -> list[Issue]:
    pending = bool(detect_migration(ctx))
    out: list[Issue] = []
    for kind, name, ddl, severity in canonical_objects(ctx):
        stored = ctx.s.integrity.object_sql(kind, name)
        if stored is None and (name == _DEDUP_MSG_ID or (pending and name in _OUR_OBJECTS)):
            continue  # reported by dedup_msg_id_index / migration_pending
        if stored is not None and normalise_ddl(stored) == normalise_ddl(ddl):
            continue
        issue: Issue = {"severity": severity, "object": name, "kind": kind,
                        "problem": "missing" if stored is None else "differs", "repairable": 1}
        if name == _DEDUP_CONTENT and ctx.s.integrity.content_duplicates_exist():
            extras = ctx.s.integrity.exact_duplicate_extras()
            if any(locked for _, locked in extras):
                issue.update(repairable=0, reason="locked memories repeat each other exactly; they block this "
                             "unique index (unlock or delete one of each)", ids=sample([r[0] for r in extras]))
            else:
                issue.update(repairable=len(extras) + 1, duplicates=len(extras))
        out.append(issue)
    return out


def detect_objects(ctx: Context) -> list[Issue]:
    return _drift(ctx)


def fix_object(ctx: Context, issue: Issue) -> dict[str, Any]:
    if not issue.get("repairable"):
        return {"fixed": False}
    name, kind = issue["object"], issue["kind"]
    ddl = {n: d for _, n, d, _ in canonical_objects(ctx)}[name]
    removed = 0
    if name == _DEDUP_CONTENT:  # exact repeats in one scope: the keeper answers for all of them
        extras = ctx.s.integrity.exact_duplicate_extras()
        if any(locked for _, locked in extras):
            return {"fixed": False, "fix_error": "locked exact duplicates block the unique index; nothing changed"}
        for row_id, _ in extras:
            if ctx.s.repairs.delete_memory(row_id):
                removed += 1
                ctx.row_deleted("memories", row_id)
    error = ctx.s.integrity.replace_object(kind, name, ddl)
    if error:
        return {"fixed": False, "fix_error": error}
    out: dict[str, Any] = {"fixed": True, **({"duplicates_deleted": removed} if removed else {})}
    if name in _TRIGGER_FTS:  # rows written while the trigger was wrong never reached the index
        fts = _TRIGGER_FTS[name]
        out["fts_rebuilt"] = fts
        if rebuild_error := ctx.s.integrity.fts_rebuild(fts):
            out["fix_error"] = rebuild_error
    return out
