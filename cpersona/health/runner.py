"""`check_health`: run the registry (cpersona/health/registry.py) and, with `fix`, repair.

The fix run, in order:
  1. validate the check names; while persistence is paused, or on a file open read-only,
     the run is a report only (`repairs_skipped`, `repairs_skip_reason`);
  2. probe the embedding backend, read the recorded vector identity;
  3. detect every check on read snapshots, no lock held — whole-file scans (quick_check)
     and process state (resident index) only ever run here; FTS5's integrity-check, which
     SQLite runs as a write, holds the file's write lock, so a report stops it after
     REPORT_LOCK_LIMIT seconds;
  4. compute the vectors of rows that lack one (no lock held);
  5. ONE write transaction: each check that found something repairable detects again and
     repairs (each check inside its own savepoint, so one failing repair undoes only itself);
  6. re-embed the rows whose vector a repair dropped, then re-run the checks read-only:
     `severity_summary` and `status` describe what is LEFT, `issues` what the run found
     and did (`fixed`, `re_embedded`, `remaining`…).
A report without fix is steps 1–3. Another process holding the write lock delays step 5
(SQLite's busy timeout, retried); if it never lets go, nothing is repaired and the answer
says so. Nothing here holds the write lock while embedding.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from cpersona.errors import DatabaseBusy, InvalidArgument
from cpersona.health import vectors
from cpersona.health.model import Check, Context, HealthEnv, Issue, NotApplicable, Probe, crashed, finish
from cpersona.health.registry import NAMES, select
from cpersona.policy import validate
from cpersona.storage import Session
from cpersona.storage.codec import to_blob
from cpersona.storage.meta import VectorState

log = logging.getLogger(__name__)

#: Seconds a report (no fix) lets one statement hold the file's write lock: below the 5 s
#: busy timeout every writer waits, so a report never makes a write fail.
REPORT_LOCK_LIMIT = 3.0
PAUSED = "persistence is paused (pause_persistence): the checks ran as a report, nothing was repaired"
READ_ONLY = "the database is open read-only (see database_damage): the checks ran as a report, nothing was repaired"
#: Attempts at the write lock (each waits the busy timeout).
LOCK_ATTEMPTS = 6
#: Values per axis in `stats.axes`.
AXIS_TOP = 20
_NULL_CHECKS = {"null_embedding": "memories", "null_episode_embedding": "episodes"}


@dataclass
class Outcome:
    """One check's result: its issues, or why it did not apply."""

    issues: list[Issue] = field(default_factory=list)
    skipped: str = ""
    repaired: bool = False


def run_check(check: Check, ctx: Context) -> Outcome:
    """Detect, turning "not applicable" into a skip and any exception into check_crashed."""
    ctx.agent = "" if check.scope == "global" else ctx.run_agent
    if check.sqlite_only and ctx.env.db.backend != "sqlite":
        return Outcome(skipped=check.sqlite_only)
    try:
        return Outcome(check.detect(ctx))
    except NotApplicable as why:
        return Outcome(skipped=str(why))
    except Exception as err:
        log.warning("health check %s failed: %s: %s", check.name, type(err).__name__, err)
        log.debug("health check %s failed", check.name, exc_info=True)
        return Outcome([crashed(check, err)])


def _fixable(issue: Issue) -> bool:
    return issue.get("type") != "check_crashed" and issue.get("fixable") is not False and issue.get("repairable") != 0


def _repairable(outcome: Outcome) -> bool:
    return any(_fixable(i) for i in outcome.issues)


def repair(check: Check, ctx: Context) -> Outcome:
    """Detect again and fix each repairable issue (inside the caller's transaction, each
    in its own savepoint; an unlocked check's repair changes process state, not rows)."""
    outcome = run_check(check, ctx)
    for issue in outcome.issues:
        if check.fix is None or not _fixable(issue):
            continue
        try:
            with ctx.s.savepoint() if ctx.writing else nullcontext():
                issue.update(check.fix(ctx, issue))
            ctx.forget_census()
        except Exception as err:
            log.warning("health repair %s failed: %s: %s", check.name, type(err).__name__, err)
            log.debug("health repair %s failed", check.name, exc_info=True)
            issue.update(fixed=False, fix_error=f"{type(err).__name__}: {err}")
    outcome.repaired = True
    return outcome


class HealthRun:
    """One check_health call over `env`."""

    def __init__(self, env: HealthEnv, agent: str, checks: list[Check]) -> None:
        self.lock_limit: float | None = REPORT_LOCK_LIMIT
        self.env = env
        self.agent = agent
        self.checks = checks
        self.probe: Probe = Probe("none")
        self.state = VectorState()
        self.extra: dict[str, Any] = {}

    def context(self, session: Session, writing: bool = False) -> Context:
        return Context(session, self.env, self.agent, self.probe, self.state, writing=writing, run_agent=self.agent,
                       lock_limit=self.lock_limit)

    def scan(self, fix: bool, keep: dict[str, Outcome] | None = None) -> dict[str, Outcome]:
        """Detect every check on read snapshots; process-state repairs happen here. With
        `keep`, unlocked checks that repaired nothing keep their earlier outcome (a residual
        re-run need not scan the whole file again)."""
        out: dict[str, Outcome] = {}
        with self.env.db.read() as s:
            ctx = self.context(s)
            for check in self.checks:
                if keep is not None and check.unlocked and not keep[check.name].repaired:
                    out[check.name] = keep[check.name]
                    continue
                out[check.name] = run_check(check, ctx)
                if fix and check.unlocked and check.fix is not None and _repairable(out[check.name]):
                    out[check.name] = repair(check, ctx)
        return out

    def repair_all(self, names: list[str]) -> tuple[dict[str, Outcome], Context]:
        """Prefetch vectors (no lock held), then repair `names` in ONE write transaction."""
        tables = [t for name, t in _NULL_CHECKS.items() if name in names]
        prefetched: dict[tuple[str, int], tuple[str, Any]] = {}
        error = ""
        if tables and self.probe.status == "ok":
            with self.env.db.read() as s:
                rows = vectors.rows_to_embed(self.context(s), tables)
            prefetched, error = vectors.embed_rows(self.env, rows)
        for attempt in range(LOCK_ATTEMPTS):
            try:
                with self.env.db.write() as s:
                    ctx = self.context(s, writing=True)
                    ctx.prefetched, ctx.prefetch_error = prefetched, error
                    done = {c.name: repair(c, ctx) for c in self.checks if c.name in names}
                    if ctx.changed:
                        s.after(self.env.after_repairs)
                return done, ctx
            except DatabaseBusy:
                if attempt == LOCK_ATTEMPTS - 1:
                    raise
                log.info("check_health: the write lock is busy; waiting (attempt %d)", attempt + 2)
        raise AssertionError("unreachable")

    def reembed_dropped(self, ctx: Context) -> int:
        """Second pass: vectors for rows a repair left without one (no lock while embedding)."""
        if not ctx.dropped or self.probe.status != "ok" or self.env.embed is None:
            return 0
        with self.env.db.read() as s:
            rows = [(t, i, row[0]) for t, i in dict.fromkeys(ctx.dropped)
                    if (row := s.vectors.pending_row(t, i)) is not None and row[5]][:vectors.MAX_REEMBED]
        found, error = vectors.embed_rows(self.env, rows)
        if error:
            self.extra["post_repair_embed_error"] = error
        written = 0
        with self.env.db.write() as s:
            for (table, row_id), (text, vec) in found.items():
                keep = self.env.keep_vector(s, vec) if self.env.keep_vector is not None else vec
                if keep is not None and s.vectors.set_if_text(table, row_id, text, to_blob(keep), True):
                    s.tasks.drop_embed(table, row_id)
                    written += 1
            if written:
                s.after(self.env.after_repairs)
        return written

    def run(self, fix: bool) -> tuple[dict[str, Outcome], dict[str, Outcome]]:
        """(what the run found and did, what is left)."""
        self.probe = vectors.probe(self.env)
        self.lock_limit = None if fix else REPORT_LOCK_LIMIT
        with self.env.db.read() as s:
            self.state = vector_state(s)
        found = self.scan(fix)
        names = [c.name for c in self.checks if fix and not c.unlocked and c.fix and _repairable(found[c.name])]
        if not names:
            return found, (self.scan(False, keep=found) if any(o.repaired for o in found.values()) else found)
        try:
            done, ctx = self.repair_all(names)
        except DatabaseBusy as err:
            self.extra.update(repairs_skipped=True, repairs_skip_reason=f"{err}; nothing was repaired")
            return found, found
        self.extra["post_repair_re_embedded"] = self.reembed_dropped(ctx)
        return {**found, **done}, self.scan(False, keep=found)


def vector_state(s: Session) -> VectorState:
    """The recorded vector identity; empty for a file without our meta table."""
    return s.meta.vector_state() if s.integrity.has_table("cpersona_meta") else VectorState()


def _finished(checks: list[Check], results: dict[str, Outcome]) -> list[Issue]:
    return [finish(c, i) for c in checks for i in results[c.name].issues]


def summarize(issues: list[Issue]) -> tuple[dict[str, int], str]:
    """(severity counts, status): any critical → unhealthy, else any warn → degraded."""
    counts = {sev: sum(1 for i in issues if i["severity"] == sev) for sev in ("critical", "warn", "info")}
    status = "unhealthy" if counts["critical"] else "degraded" if counts["warn"] else "healthy"
    return counts, status


def stats(env: HealthEnv, agent: str) -> dict[str, Any]:
    """Sizes and counts of the file (and of `agent` when given); {error} on a damaged file."""
    try:
        with env.db.read() as s:
            out: dict[str, Any] = {"db_size_bytes": s.integrity.size_bytes(), **s.inventory.counts()}
            out["axes"] = {axis: {v or "(global)": n for v, n in s.inventory.axis(axis, agent, AXIS_TOP).items()}
                           for axis in ("project_id", "channel")}
            if agent:
                out.update(s.inventory.agent_counts(agent))
        return out
    except Exception as err:  # noqa: BLE001 — a damaged file must still give a report
        return {"error": f"{type(err).__name__}: {err}"}


def check_health(env: HealthEnv, agent_id: Any = "", fix: Any = False, checks: Any = None) -> dict[str, Any]:
    """Run the health checks (module doc). Returns {total_memories, issues, severity_summary,
    status, fixed, checks_run, skipped, stats, elapsed_ms, repairs_skipped?, repairs_skip_reason?,
    post_repair_re_embedded?} or, for unknown names, {ok: false, error, unknown_checks,
    valid_checks}. Raises InvalidArgument for arguments of the wrong type."""
    agent, fix, names = _arguments(agent_id, fix, checks)
    selected, unknown = select(names)
    if unknown:
        return {"ok": False, "error": f"unknown check name(s): {', '.join(unknown)}", "unknown_checks": unknown,
                "valid_checks": list(NAMES)}
    started = time.monotonic()
    run = HealthRun(env, agent, selected)
    fix, skipped = downgrade(env, fix)
    run.extra.update(skipped)
    found, left = run.run(fix)
    issues = _finished(selected, found)
    failed = {i["check"] for i in issues if i.get("fix_error")}
    summary, status = summarize([_repair_failed(i) if i["check"] in failed else i for i in _finished(selected, left)])
    facts = stats(env, agent)
    return {"total_memories": facts.get("memories"),
            "issues": [_repair_failed(i) if i.get("fix_error") else i for i in issues],
            "severity_summary": summary, "status": status, "fixed": fix and not run.extra.get("repairs_skipped"),
            "checks_run": [c.name for c in selected],
            "skipped": [{"check": c.name, "reason": found[c.name].skipped} for c in selected if found[c.name].skipped],
            "stats": facts, **run.extra, "elapsed_ms": round(1000 * (time.monotonic() - started))}


def _repair_failed(issue: Issue) -> Issue:
    """An issue whose repair raised counts at least as a warning (a failed repair is never
    `healthy`); its `fix_error` names the failure."""
    return {**issue, "severity": "warn"} if issue["severity"] == "info" else issue


def downgrade(env: HealthEnv, fix: bool) -> tuple[bool, dict[str, Any]]:
    """(fix, {repairs_skipped, repairs_skip_reason}) — no repairs while paused or read-only."""
    reason = PAUSED if env.pause is not None and env.pause.active() else READ_ONLY if env.db.read_only else ""
    if not fix or not reason:
        return fix, {}
    return False, {"repairs_skipped": True, "repairs_skip_reason": reason}


#: Bounds of the `checks` argument: more names than there are checks and issue types, each
#: longer than any name, can only be a mistake (and would be echoed back in `unknown_checks`).
MAX_CHECK_NAMES = 100
MAX_CHECK_NAME_CHARS = 64


def _arguments(agent_id: Any, fix: Any, checks: Any) -> tuple[str, bool, list[str]]:
    if agent_id is None:
        agent_id = ""
    if not isinstance(agent_id, str):
        raise InvalidArgument("agent_id", "must be a string ('' = every agent)")
    validate.identifier("agent_id", agent_id)
    if not isinstance(fix, bool):
        raise InvalidArgument("fix", "must be true or false")
    return agent_id, fix, list(validate.string_list("checks", checks, max_items=MAX_CHECK_NAMES,
                                                    max_chars=MAX_CHECK_NAME_CHARS))
