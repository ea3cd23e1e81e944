"""get_session_findings: check_health(fix=false) over the whole store, every agent, delivered
as findings (health/findings.py) with check_health's verdict alongside. Read-only — it never
repairs, and it runs while persistence is paused — and not free: it runs the whole registry,
SQLite's quick_check and FTS5's integrity-check included, so it costs a pass over the file."""

from __future__ import annotations

from dataclasses import dataclass

from cpersona.health import findings
from cpersona.policy import validate
from cpersona.service.health import HealthService
from cpersona.service.outcomes import Report

#: per_kind_limit's upper bound (more findings of one kind than this are not worth a context).
MAX_PER_KIND = 1000


@dataclass(frozen=True, eq=False)
class FindingsService:
    """get_session_findings over the health service."""

    health: HealthService

    def get_session_findings(self, per_kind_limit: object = 5, include_summary: object = True) -> Report:
        """{ok, findings: [{kind, check, severity, health_severity, …}], total, counts_by_kind,
        counts_by_severity, capped_kinds, per_kind_limit, summary?, health: {status,
        severity_summary, skipped}}. Raises InvalidArgument (per_kind_limit 1..1000, a boolean
        include_summary)."""
        limit = validate.limit("per_kind_limit", per_kind_limit, maximum=MAX_PER_KIND)
        with_summary = validate.boolean("include_summary", include_summary)
        report = self.health.check_health("", False, None)
        out = {"ok": True, **findings.deliver(report["issues"], limit)}
        if with_summary:
            out["summary"] = findings.summary(out)
        out["health"] = {key: report[key] for key in ("status", "severity_summary", "skipped")}
        if "database_damage" in report:
            out["health"]["database_damage"] = report["database_damage"]
        return out
