"""`deep_check`: slower, per-agent inspections of content quality.

| check                 | fix | finds                                                              |
|-----------------------|-----|--------------------------------------------------------------------|
| anonymous_source      | ✓   | memories with the anonymous User source whose content starts       |
|                       |     | "[name] " → source {type: User, id: "", name}                      |
| short_content         | ✓   | memories of ≤ 5 characters after trimming → deleted                |
| stale_profile         | –   | a profile not updated for 30 days                                  |
| orphaned_episodes     | –   | episodes whose span, from the first turn to the archiving, holds   |
|                       |     | none of the agent's memories                                       |
| calibration_staleness | –   | the calibration file against the stored vectors, and its age       |
| near_duplicate        | –   | pairs of the newest 1000 embedded memories with cosine > 0.97      |
|                       |     | (exact repeats excluded)                                           |

Fixes never touch locked memories and run in ONE write transaction; a check that raises
answers `{error}` under its name while the others still run.
"""

from __future__ import annotations

import bisect
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from cpersona.errors import InvalidArgument
from cpersona.health import fields, vectors
from cpersona.health.model import Context, HealthEnv, Probe
from cpersona.health.operations import calibration_status
from cpersona.health.runner import MAX_CHECK_NAME_CHARS, MAX_CHECK_NAMES, downgrade, vector_state
from cpersona.policy import validate
from cpersona.storage.codec import from_blob
from cpersona.util.time import parse_ts

log = logging.getLogger(__name__)

SHORT_CHARS = 5
STALE_PROFILE_DAYS = 30
#: created_at is stored to the second: a memory of the same second may carry a later fraction (days).
CREATED_AT_RESOLUTION = 1 / 86400
NEAR_DUPLICATE_ROWS = 1000
NEAR_DUPLICATE_COSINE = 0.97


def _preview(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + "…"


# ------------------------------------------------------------------ anonymous
def anonymous_source(ctx: Context, fix: bool) -> dict[str, Any]:
    good, bad = [], []
    for row_id, content, source, locked in ctx.s.inventory.user_sentinel_rows(ctx.agent):
        match = fields.NAMED.match(content)
        if match:
            good.append((row_id, match.group(1).strip(), source, locked))
        else:
            bad.append((row_id, content))
    fixed = 0
    if fix:
        for row_id, name, source, locked in good:
            new = json.dumps({"type": "User", "id": "", "name": name}, ensure_ascii=False)
            fixed += 0 if locked else ctx.s.repairs.set_source(row_id, source, new)
    return {"recoverable": len(good), "unrecoverable": len(bad), "fixed": fixed,
            "unfixable_locked": sum(1 for g in good if g[3]),
            "samples": [{"id": g[0], "recovered_name": g[1]} for g in good[:5]],
            "unrecoverable_samples": [{"id": i, "content_preview": _preview(c, 60)} for i, c in bad[:5]]}


def short_content(ctx: Context, fix: bool) -> dict[str, Any]:
    rows = ctx.s.inventory.short_rows(ctx.agent, SHORT_CHARS)
    fixed = 0
    if fix:
        for row_id, _, locked in rows:
            if not locked and ctx.s.repairs.delete_memory(row_id):
                fixed += 1
                ctx.row_deleted("memories", row_id)
    return {"count": len(rows), "fixed": fixed, "locked": sum(1 for r in rows if r[2]),
            "samples": [{"id": r[0], "content": r[1]} for r in rows[:10]]}


# ----------------------------------------------------------------- read-only
def stale_profile(ctx: Context, fix: bool) -> dict[str, Any]:
    updated = ctx.s.inventory.profile_updated(ctx.agent)
    when = parse_ts(updated)
    stale = when is not None and (datetime.now(UTC) - when).days >= STALE_PROFILE_DAYS
    return {"count": int(stale), "threshold_days": STALE_PROFILE_DAYS, "last_updated": updated}


def orphaned_episodes(ctx: Context, fix: bool) -> dict[str, Any]:
    """Episodes of which no memory of the agent was stored from the first turn until the
    episode was archived: the span [start_time, end_time] widened to created_at, since an
    agent commonly stores the session's facts after its last turn, when it closes the session."""
    days = ctx.s.inventory.memory_days(ctx.agent)
    orphans = []
    for row_id, summary, start, end, lo, hi, archived in ctx.s.inventory.episode_spans(ctx.agent):
        hi = max(hi, archived + CREATED_AT_RESOLUTION if archived else hi)
        i = bisect.bisect_left(days, lo)
        if i == len(days) or days[i] > hi:
            orphans.append({"id": row_id, "summary": _preview(summary, 80), "start": start, "end": end})
    return {"count": len(orphans), "samples": orphans[:5]}


def calibration_staleness(ctx: Context, fix: bool) -> dict[str, Any]:
    return calibration_status(ctx)


def near_duplicate(ctx: Context, fix: bool) -> dict[str, Any]:
    rows = ctx.s.inventory.newest_vectors(ctx.agent, NEAR_DUPLICATE_ROWS)
    decoded = [(row_id, text, from_blob(blob)) for row_id, text, blob in rows]
    usable = [(i, t, v) for i, t, v in decoded if v is not None]
    base: dict[str, Any] = {"rows_scanned": len(usable), "threshold": NEAR_DUPLICATE_COSINE}
    if len({v.shape[0] for _, _, v in usable}) > 1:
        return {**base, "pairs": 0, "skipped": "mixed embedding dimensions"}
    if len(usable) < 2:
        return {**base, "pairs": 0, "samples": []}
    matrix = np.stack([v for _, _, v in usable])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0, 1, norms)
    sims = np.triu(matrix @ matrix.T, k=1)
    found = []
    for a, b in zip(*np.nonzero(sims > NEAR_DUPLICATE_COSINE)):
        if usable[a][1] != usable[b][1]:
            found.append((float(sims[a, b]), usable[a], usable[b]))
    found.sort(key=lambda f: -f[0])
    return {**base, "pairs": len(found),
            "samples": [{"id_a": x[0], "id_b": y[0], "cosine": round(c, 4), "preview_a": _preview(x[1], 60),
                         "preview_b": _preview(y[1], 60)} for c, x, y in found[:20]]}


DeepCheck = Callable[[Context, bool], dict[str, Any]]
#: name → (function, has a fix), in the order they run.
DEEP_CHECKS: dict[str, tuple[DeepCheck, bool]] = {
    "anonymous_source": (anonymous_source, True),
    "short_content": (short_content, True),
    "stale_profile": (stale_profile, False),
    "orphaned_episodes": (orphaned_episodes, False),
    "calibration_staleness": (calibration_staleness, False),
    "near_duplicate": (near_duplicate, False),
}


def _run(name: str, ctx: Context, fix: bool) -> dict[str, Any]:
    try:
        if not fix:
            return DEEP_CHECKS[name][0](ctx, False)
        with ctx.s.savepoint():  # a repair that raises is undone; the others stand
            return DEEP_CHECKS[name][0](ctx, True)
    except Exception as err:
        log.warning("deep check %s failed: %s: %s", name, type(err).__name__, err)
        log.debug("deep check %s failed", name, exc_info=True)
        return {"error": f"{type(err).__name__}: {err}"}


def deep_check(env: HealthEnv, agent_id: Any, fix: Any = False, checks: Any = None) -> dict[str, Any]:
    """Run the deep checks for ONE agent (exact id). Returns {agent_id, checks_run, results:
    {name: {...} | {error}}, fixed, unknown_checks?, repairs_skipped?, repairs_skip_reason?}.
    Unknown names are listed in `unknown_checks` and not run. Raises InvalidArgument."""
    if not isinstance(agent_id, str):
        raise InvalidArgument("agent_id", "must be a string: the agent to inspect")
    validate.identifier("agent_id", agent_id)
    if not isinstance(fix, bool):
        raise InvalidArgument("fix", "must be true or false")
    names = validate.string_list("checks", checks, max_items=MAX_CHECK_NAMES, max_chars=MAX_CHECK_NAME_CHARS)
    selected = [n for n in DEEP_CHECKS if not names or n in names]
    out: dict[str, Any] = {"agent_id": agent_id, "checks_run": selected}
    if unknown := sorted(set(names) - set(DEEP_CHECKS)):
        out["unknown_checks"] = unknown
    fix, skipped = downgrade(env, fix)
    out.update(skipped)
    probe = vectors.probe(env) if "calibration_staleness" in selected else None
    with env.db.read() as s:
        ctx = Context(s, env, agent_id, probe or Probe("none"), vector_state(s), run_agent=agent_id)
        results = {n: _run(n, ctx, False) for n in selected if not (fix and DEEP_CHECKS[n][1])}
    fixing = [n for n in selected if fix and DEEP_CHECKS[n][1]]
    if fixing:
        with env.db.write() as s:
            ctx = Context(s, env, agent_id, ctx.probe, ctx.state, writing=True, run_agent=agent_id)
            results.update({n: _run(n, ctx, True) for n in fixing})
            if ctx.changed:
                s.after(env.after_repairs)
    return {**out, "results": {n: results[n] for n in selected}, "fixed": fix}
