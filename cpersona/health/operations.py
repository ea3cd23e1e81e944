"""Checks on how the store is operated: project ids that differ only in spelling, the task
queue (stale and failed rows), agents without a profile, the calibration file, the
operating-context file, and the remote-vector setting of the original (which this server
does not have)."""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from cpersona.calibration import sidecar
from cpersona.calibration.state import scoring_version
from cpersona.health.model import Context, Issue, NotApplicable, sample
from cpersona.jobs.queued import Task

#: Queue rows older than this are stale (seconds).
STALE_TASK_SECONDS = 3600
#: Operating-context summaries longer than this are sent on every MCP initialize.
MAX_SUMMARY_CHARS = 3000
CALIBRATION_MAX_AGE_DAYS = 90


# ---------------------------------------------------------------------- axes
def detect_axis(ctx: Context) -> list[Issue]:
    groups: dict[str, list[str]] = defaultdict(list)
    for project, _ in ctx.s.repairs.project_ids(ctx.agent):
        groups[re.sub(r"[^a-z0-9]", "", project.lower())].append(project)
    clusters = [sorted(names) for names in groups.values() if len(names) > 1]
    if not clusters:
        return []
    return [{"clusters": clusters[:20], "count": len(clusters),
             "hint": "these project ids differ only in case or punctuation; rows are split between them"}]


def detect_missing_profile(ctx: Context) -> list[Issue]:
    agents = ctx.s.repairs.agents_without_profile(ctx.agent)
    return [{"count": len(agents), "agents": agents[:20]}] if agents else []


# --------------------------------------------------------------------- queue
def _task_verdict(ctx: Context, task_id: int, task_type: str, payload: str) -> str:
    """"waiting" (its row still needs a vector) | "orphaned" (row gone or embedded) |
    "unrunnable" (a type or payload this server never runs)."""
    task = Task((task_id, task_type, "", payload, 0))
    if task.error is not None:
        return "unrunnable"
    has = ctx.s.vectors.has_vector(task.table, task.row_id)
    return "waiting" if has is False else "orphaned"


def _sorted_tasks(ctx: Context, rows: list[tuple]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"waiting": [], "orphaned": [], "unrunnable": []}
    for row in rows:
        out[_task_verdict(ctx, row[0], row[1], row[2])].append(row[0])
    return out


def detect_stale_tasks(ctx: Context) -> list[Issue]:
    rows = ctx.s.inventory.old_tasks(ctx.agent, STALE_TASK_SECONDS)
    if not rows:
        return []
    kinds = _sorted_tasks(ctx, rows)
    out: Issue = {"count": len(rows), "older_than_seconds": STALE_TASK_SECONDS,
                  **{k: len(v) for k, v in kinds.items()},
                  "repairable": len(kinds["orphaned"]) + len(kinds["unrunnable"]), "ids": sample([r[0] for r in rows])}
    if kinds["waiting"]:
        out["hint"] = ("embedding tasks wait for the embedding backend (get_queue_status says why); they are kept "
                       "so every row gets its vector")
    return [out]


def fix_stale_tasks(ctx: Context, issue: Issue) -> dict[str, Any]:
    kinds = _sorted_tasks(ctx, ctx.s.inventory.old_tasks(ctx.agent, STALE_TASK_SECONDS))
    deleted = sum(ctx.s.inventory.delete_task(i) for i in kinds["orphaned"] + kinds["unrunnable"])
    return {"fixed": deleted, "deleted": deleted, "kept_waiting": len(kinds["waiting"])}


def _failed(ctx: Context) -> list[tuple[int, str, str, str | None]]:
    rows = ctx.s.inventory.failed_tasks(ctx.agent)
    if rows is None:
        raise NotApplicable("the queue table predates failure tracking (the file was not opened by this server yet)")
    return rows


def detect_failed_tasks(ctx: Context) -> list[Issue]:
    rows = _failed(ctx)
    if not rows:
        return []
    kinds = _sorted_tasks(ctx, rows)
    retry = len(kinds["waiting"]) if ctx.probe.status == "ok" else 0
    return [{"count": len(rows), **{k: len(v) for k, v in kinds.items()},
             "repairable": retry + len(kinds["orphaned"]) + len(kinds["unrunnable"]),
             "samples": [{"id": r[0], "task_type": r[1], "error": (r[3] or "")[:200]} for r in rows[:5]]}]


def fix_failed_tasks(ctx: Context, issue: Issue) -> dict[str, Any]:
    kinds = _sorted_tasks(ctx, _failed(ctx))
    requeued = sum(ctx.s.inventory.requeue_task(i) for i in kinds["waiting"]) if ctx.probe.status == "ok" else 0
    deleted = sum(ctx.s.inventory.delete_task(i) for i in kinds["orphaned"] + kinds["unrunnable"])
    ctx.changed = ctx.changed or requeued > 0
    return {"fixed": requeued + deleted, "requeued": requeued, "deleted": deleted}


# --------------------------------------------------------------- calibration
def calibration_status(ctx: Context) -> dict[str, Any]:
    """The calibration file against the stored vectors: {status, ...} with status
    not_applicable | never_calibrated | ok | lost | corrupt | stale_model |
    stale_scoring_version | unknown | stale (older than CALIBRATION_MAX_AGE_DAYS)."""
    path = sidecar.path_for(ctx.settings.db_file)
    if path is None or (ctx.probe.status == "none" and ctx.state.model is None):
        return {"status": "not_applicable"}
    loaded = sidecar.load(path)
    embedded = ctx.census()["vectors"] if ctx.agent == "" else ctx.s.inventory.embedded_memories("")
    if loaded.status == "absent":
        if ctx.s.integrity.has_table("cpersona_meta") and sidecar.recorded(ctx.s) is not None:
            return {"status": "lost", "hint": f"{path.name} is missing although this file was calibrated; restore it "
                    "with the database or call calibrate_threshold"}
        # the server calibrates by itself from CPERSONA_CALIBRATE_MIN_ROWS (calibration/growth.py)
        missing = embedded >= ctx.settings.calibrate_min_rows
        return {"status": "never_calibrated" if missing else "ok", "embedded": embedded}
    if loaded.status == "corrupt":
        return {"status": "corrupt", "error": loaded.error}
    data = loaded.data
    if data.get("scoring_version") != scoring_version(ctx.settings):
        return {"status": "stale_scoring_version", "found": data.get("scoring_version"),
                "hint": "restart the server (it recalibrates) or call calibrate_threshold"}
    if ctx.state.model is not None and (data.get("embedding_model"), data.get("embedding_dim")) != (
            ctx.state.model, ctx.state.dim):
        return {"status": "stale_model", "calibrated_with": data.get("embedding_model"),
                "stored_model": ctx.state.model, "hint": "call calibrate_threshold for each agent"}
    try:
        when = datetime.fromisoformat(str(data.get("calibrated_at")))
    except ValueError:
        return {"status": "unknown", "calibrated_at": data.get("calibrated_at")}
    age = (datetime.now(UTC) - (when if when.tzinfo else when.replace(tzinfo=UTC))).days
    if age > CALIBRATION_MAX_AGE_DAYS:
        return {"status": "stale", "age_days": age, "hint": "call calibrate_threshold"}
    return {"status": "ok", "age_days": age}


def detect_calibration(ctx: Context) -> list[Issue]:
    found = calibration_status(ctx)
    status = found["status"]
    if status == "not_applicable":
        raise NotApplicable("no embedding backend and no stored vectors, or an in-memory database")
    if status in ("ok", "stale", "unknown"):
        return []
    kind = {"type": "calibration_missing", "severity": "info"} if status == "never_calibrated" else {}
    return [{**kind, **found,
             "reason": "until recalibrated, recall uses heuristic quality gates (each recall says so)"}]


# ---------------------------------------------------------- operating context
def _context(ctx: Context) -> tuple[Any, str]:
    oc = ctx.env.operating_context
    if oc is None:
        raise NotApplicable("no operating context in this process")
    return oc.current()


def detect_context_parse(ctx: Context) -> list[Issue]:
    _, why = _context(ctx)
    if why.startswith("sidecar unusable"):
        return [{"error": why, "reason": "the operating context is dormant until the file is fixed"}]
    return []


def detect_context_size(ctx: Context) -> list[Issue]:
    parsed, _ = _context(ctx)
    if parsed is None or len(parsed.summary) <= MAX_SUMMARY_CHARS:
        return []
    return [{"length": len(parsed.summary), "max_len": MAX_SUMMARY_CHARS,
             "reason": "the summary is sent as the MCP instructions of every session"}]


def detect_vector_fallback(ctx: Context) -> list[Issue]:
    raise NotApplicable("this server always keeps vectors in the database file (no remote vector mode)")
