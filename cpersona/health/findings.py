"""check_health's issues delivered as findings (get_session_findings): one detector — the
registry of health/registry.py — and this transform, which adds nothing it did not find.

A finding is the issue verbatim plus two keys: `kind` (what it is) and `severity` (a static
property of the kind, from `SEVERITY`: critical = the read contract is broken now, warn = two
stored facts disagree or a part of the service is degraded, info = an observation). The
severity check_health gave this instance rides along as `health_severity` (it may be lower:
a warning nobody can repair automatically is reported `info` there), and an issue's own
`kind` (schema_objects: index / trigger) moves to `object_kind`. `check` names the registry
check that produced it: `check_health(checks=[finding["check"]])` re-runs exactly that.

`kind` is the check's name, except where one check reports different things at different
severities: an issue type of its own (`fts_unavailable`, `embedding_model_mismatch`, …) is
its kind, and the tiers of the vector checks and of schema_objects are kinds of their own
(`null_embedding_expected` / `null_embedding` / `null_embedding_pipeline_down`,
`schema_objects` / `schema_objects_perf_index`), so one kind never carries two severities.
A check that raised is the kind `check_crashed` (the pull is then partial, and says so).

`deliver` caps the findings per kind in detector order, names every kind that had more in
`capped_kinds`, and counts what it returns.
"""

from __future__ import annotations

from typing import Any

from cpersona.health.model import Issue
from cpersona.health.registry import BY_NAME, CHECKS

#: The severity of every kind (module doc); a kind not listed is `info`.
SEVERITY: dict[str, str] = {
    **{check.name: check.severity for check in CHECKS},
    "check_crashed": "warn",
    "fts_integrity": "critical",  # its own issues are the index failing FTS5's integrity-check
    "fts_unavailable": "warn",
    "fts_not_checked": "info",
    **{f"{name}_expected": "info" for name in ("null_embedding", "null_episode_embedding")},
    **{f"{name}_pipeline_down": "critical" for name in ("null_embedding", "null_episode_embedding")},
    "schema_objects": "critical",
    "schema_objects_perf_index": "warn",
    "reembed_pending": "info",
    "embedding_backend_missing": "info",
    "embedding_backend_unavailable": "warn",
    "embedding_model_mismatch": "warn",
    "calibration_missing": "info",
}
_SEVERITIES = ("critical", "warn", "info")


def kind_of(issue: Issue) -> str:
    """The kind an issue (as check_health reports it) is delivered under (module doc)."""
    check, kind = issue.get("check", ""), issue.get("type", "")
    if kind == "check_crashed" or check not in BY_NAME:
        return kind or check
    if kind != BY_NAME[check].issue_type:
        return kind
    if check in ("null_embedding", "null_episode_embedding"):
        return f"{check}_expected" if issue.get("expected") else (
            f"{check}_pipeline_down" if issue.get("severity") == "critical" else check)
    if check == "schema_objects":
        return check if issue.get("severity") == "critical" else "schema_objects_perf_index"
    return check


def as_finding(issue: Issue) -> dict[str, Any]:
    """One issue as a finding (module doc)."""
    kind = kind_of(issue)
    out = {k: v for k, v in issue.items() if k not in ("kind", "severity")}
    if "kind" in issue:
        out["object_kind"] = issue["kind"]
    out["health_severity"] = issue.get("severity")
    return {**out, "kind": kind, "severity": SEVERITY.get(kind, "info")}


def deliver(issues: list[Issue], per_kind_limit: int) -> dict[str, Any]:
    """{findings, total, counts_by_kind, counts_by_severity, capped_kinds, per_kind_limit}:
    the first `per_kind_limit` findings of each kind in detector order; the counts describe
    the findings returned, `capped_kinds` the kinds that had more."""
    kept: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    capped: list[str] = []
    for finding in map(as_finding, issues):
        kind = finding["kind"]
        seen[kind] = seen.get(kind, 0) + 1
        if seen[kind] > per_kind_limit:
            if kind not in capped:
                capped.append(kind)
            continue
        kept.append(finding)
    by_kind: dict[str, int] = {}
    by_severity: dict[str, int] = {}
    for finding in kept:
        by_kind[finding["kind"]] = by_kind.get(finding["kind"], 0) + 1
        by_severity[finding["severity"]] = by_severity.get(finding["severity"], 0) + 1
    return {"findings": kept, "total": len(kept), "counts_by_kind": by_kind, "counts_by_severity": by_severity,
            "capped_kinds": capped, "per_kind_limit": per_kind_limit}


def summary(delivered: dict[str, Any]) -> str:
    """The delivered findings in one sentence (rendered from them, so the two agree)."""
    if not delivered["findings"]:
        return "Storage findings: none."
    severities = ", ".join(f"{s} {delivered['counts_by_severity'][s]}" for s in _SEVERITIES
                           if s in delivered["counts_by_severity"])
    kinds = ", ".join(f"{k} {n}" for k, n in delivered["counts_by_kind"].items())
    text = f"Storage findings: {delivered['total']} returned ({severities}); kinds: {kinds}."
    if delivered["capped_kinds"]:
        text += (f" Capped at {delivered['per_kind_limit']} per kind: {', '.join(delivered['capped_kinds'])} "
                 "— more exist than were returned.")
    return text
