"""Checks on stored vectors and the embedding side: vectors of the wrong length, rows
without a vector (re-embedded by a fix run), the backend answering with the recorded model,
and the resident vector index agreeing with the table.

Re-embedding never happens inside the write transaction: a fix run computes the vectors
of up to `MAX_REEMBED` rows per table first (`prefetch`), and the transaction writes each
only if the row's text is unchanged and it still has no vector.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cpersona.embedding import identity
from cpersona.errors import EmbeddingError
from cpersona.health.model import Context, HealthEnv, Issue, NotApplicable, Probe, sample
from cpersona.storage.codec import to_blob
from cpersona.storage.meta import TABLES

#: Rows re-embedded per table per fix run, and texts per embedding call.
MAX_REEMBED = 500
BATCH = 32
#: Share of memories without a vector above which the gap is critical.
CRITICAL_SHARE = 0.5
PROBE_TEXT = "cpersona health probe"


def probe(env: HealthEnv) -> Probe:
    """Embed one fixed text with the backend (never through the write path: the probe
    records nothing). A bundled model still loading is not waited for."""
    emb = env.embedder
    if emb is None:
        return Probe("none")
    if not emb.ready():
        failed = getattr(emb, "load_error", None)  # a bundled model that failed for good (local.py)
        if failed:
            return Probe("failed", emb.model_id, emb.dim, f"the embedding model failed: {failed}")
        return Probe("loading", emb.model_id, emb.dim, "the embedding model is still loading")
    try:
        vectors = emb.embed([PROBE_TEXT])
    except EmbeddingError as err:
        return Probe("failed", emb.model_id, emb.dim, str(err))
    return Probe("ok", emb.model_id, int(vectors.shape[1]))


def expected_dim(ctx: Context) -> tuple[int | None, str]:
    """(the dimension stored vectors must have, why it is unknown). The database's
    recorded identity decides, else the backend's live answer; when neither is known, or
    the backend contradicts the record (which one is right is for a person to decide —
    `embedding_backend` reports it), None: then only lengths no float32 vector can have
    are wrong, so a wrong record never makes a repair drop every vector."""
    state, p = ctx.state, ctx.probe
    if state.model is not None and state.dim:
        if p.status == "ok" and (p.model, p.dim) != (state.model, state.dim):
            return None, (f"the backend ({p.model}, {p.dim}-d) contradicts the recorded identity ({state.model}, "
                          f"{state.dim}-d); only impossible lengths are checked")
        return int(state.dim), ""
    if p.status == "ok":
        return p.dim, ""
    return None, "no recorded model and no backend answer; only impossible lengths are checked"


# --------------------------------------------------------------- dimension
def _memories_sound(ctx: Context, want: int | None) -> bool:
    """True when the census alone proves every memory vector has a sound length."""
    census = ctx.census()
    lo, hi = census["min_vector_bytes"], census["max_vector_bytes"]
    if not census["vectors"]:
        return True
    return lo == hi and (lo == want if want is not None else lo > 0 and lo % 4 == 0)


def _bad(ctx: Context) -> dict[str, list[tuple[int, int]]]:
    dim, _ = expected_dim(ctx)
    want = 4 * dim if dim else None
    return {t: [] if t == "memories" and _memories_sound(ctx, want) else
            ctx.s.inventory.bad_vectors(t, want, ctx.state.stale_range(t), ctx.agent) for t in TABLES}


def detect_dimension(ctx: Context) -> list[Issue]:
    bad = _bad(ctx)
    count = sum(len(rows) for rows in bad.values())
    if not count:
        return []
    dim, unknown = expected_dim(ctx)
    return [{"expected_dim": dim, **({"note": unknown} if unknown else {}), "count": count,
             "memories": len(bad["memories"]), "episodes": len(bad["episodes"]), "repairable": count,
             "lengths": sorted({length for rows in bad.values() for _, length in rows})[:10],
             "ids": {t: sample([r[0] for r in rows]) for t, rows in bad.items() if rows}}]


def fix_dimension(ctx: Context, issue: Issue) -> dict[str, Any]:
    fixed = 0
    for table, rows in _bad(ctx).items():
        ids = [r[0] for r in rows]
        fixed += ctx.s.inventory.drop_vectors(table, ids)
        for row_id in ids:
            ctx.vector_dropped(table, row_id)
    return {"fixed": fixed}


# ----------------------------------------------------------- null vectors
def _null_issue(ctx: Context, table: str) -> list[Issue]:
    """Rows without a vector. Those with a pending embed task while this process's task
    queue drains it (an import being embedded) are `queued`: expected, not a defect, and left
    to the queue by a fix run (which would otherwise embed them a second time)."""
    if table == "memories":
        census = ctx.census()
        rows, null, locked = census["rows"], census["null_vector"], census["null_vector_locked"]
    else:
        rows, null, locked = ctx.s.inventory.vector_counts(table, ctx.agent)
    if not null:
        return []
    out: Issue = {"count": null, "rows": rows, "locked": locked}
    queued, queued_locked = ctx.s.inventory.queued_without_vector(table, ctx.agent)
    if queued:
        out["queued"] = queued
    if not ctx.env.queue_draining():
        queued = queued_locked = 0
    left = null - queued  # rows no queue is embedding
    if ctx.probe.status == "none":
        out.update(severity="info", expected=True,
                   reason="no embedding backend configured: rows are kept without vectors (keyword search only)")
    elif not left and ctx.probe.status == "ok":
        out.update(severity="info", expected=True,
                   reason="the task queue is embedding them (get_queue_status shows its progress)")
    elif table == "memories" and rows and left / rows > CRITICAL_SHARE:
        out["severity"] = "critical"
    if ctx.probe.status == "ok":
        out["repairable"] = min(null - locked - (queued - queued_locked), MAX_REEMBED)
    else:
        out["repairable"] = 0
        if ctx.probe.status != "none":
            out["reason"] = f"the embedding backend cannot re-embed now ({ctx.probe.status}: {ctx.probe.error})"
    return [out]


def _null_fix(ctx: Context, table: str) -> dict[str, Any]:
    written = 0
    for (t, row_id), (text, vec) in ctx.prefetched.items():
        if t != table:
            continue
        keep = ctx.env.keep_vector(ctx.s, vec) if ctx.env.keep_vector is not None else vec
        if keep is not None and ctx.s.vectors.set_if_text(table, row_id, text, to_blob(keep), only_if_missing=True):
            ctx.s.tasks.drop_embed(table, row_id)
            written += 1
    ctx.changed = ctx.changed or written > 0
    remaining = ctx.s.inventory.vector_counts(table, ctx.agent)[1]
    out: dict[str, Any] = {"fixed": written, "re_embedded": written, "remaining": remaining}
    if ctx.prefetch_error:
        out["fix_error"] = ctx.prefetch_error
    return out


def detect_null_memories(ctx: Context) -> list[Issue]:
    return _null_issue(ctx, "memories")


def fix_null_memories(ctx: Context, issue: Issue) -> dict[str, Any]:
    return _null_fix(ctx, "memories")


def detect_null_episodes(ctx: Context) -> list[Issue]:
    return _null_issue(ctx, "episodes")


def fix_null_episodes(ctx: Context, issue: Issue) -> dict[str, Any]:
    return _null_fix(ctx, "episodes")


def embed_rows(env: HealthEnv, rows: list[tuple[str, int, str]]) -> tuple[dict[tuple[str, int], tuple[str, Any]], str]:
    """Vectors for (table, id, text) rows, in batches of BATCH, with no lock held.
    Returns ({(table, id): (text, vector)}, error text of the batch that failed or '')."""
    out: dict[tuple[str, int], tuple[str, Any]] = {}
    if env.embed is None:
        return out, "no embedding backend"
    for start in range(0, len(rows), BATCH):
        batch = rows[start:start + BATCH]
        try:
            vectors = env.embed([text for _, _, text in batch])
        except EmbeddingError as err:
            return out, str(err)
        for (table, row_id, text), vec in zip(batch, np.asarray(vectors)):
            out[(table, row_id)] = (text, vec)
    return out, ""


def rows_to_embed(ctx: Context, tables: list[str]) -> list[tuple[str, int, str]]:
    """(table, id, text) of the unlocked rows without a vector the null-vector repairs will
    write (at most MAX_REEMBED per table; not those this process's task queue is embedding);
    their vectors are computed with no lock held."""
    skip_queued = ctx.env.queue_draining()
    return [(t, row_id, text) for t in tables
            for row_id, text in ctx.s.inventory.rows_without_vector(t, ctx.agent, MAX_REEMBED, skip_queued)]


# -------------------------------------------------------------- backend
def detect_backend(ctx: Context) -> list[Issue]:
    p, state = ctx.probe, ctx.state
    out: list[Issue] = []
    if state.pending:
        stale = identity.stale_count(ctx.s, state)
        if stale:
            out.append({"type": "reembed_pending", "severity": "info", "awaiting": stale,
                        "from_model": state.pending.get("from_model"), "model": state.model,
                        "hint": "run `cpersona reembed`; until then those rows are left out of vector search"})
    if p.status == "none":
        if state.model is None:
            raise NotApplicable("no embedding backend configured and no vectors recorded")
        out.append({"type": "embedding_backend_missing", "severity": "info", "recorded_model": state.model,
                    "reason": "vectors are stored but no embedding backend is configured: vector search is off"})
    elif p.status == "loading":
        raise NotApplicable("the bundled embedding model is still loading; not probed")
    elif p.status == "failed":
        out.append({"type": "embedding_backend_unavailable", "severity": "warn", "model": p.model, "error": p.error,
                    "reason": "the backend did not answer; new rows are stored without vectors and queued"})
    elif state.model is not None and (state.model, state.dim) != (p.model, p.dim):
        out.append({"type": "embedding_model_mismatch", "severity": "warn", "recorded_model": state.model,
                    "recorded_dim": state.dim, "backend_model": p.model, "backend_dim": p.dim,
                    "hint": "serve the recorded model, or re-embed the file with this one (`cpersona reembed`)"})
    return out


# ---------------------------------------------------------- resident index
def _index_drift(ctx: Context) -> list[dict[str, Any]]:
    env = ctx.env
    if env.resident is None:
        raise NotApplicable("no resident vector index in this process")
    env.refresh()
    with env.db.commits_settled():
        before = env.db.data_version()
        held = env.resident.loaded()
        if held is None:
            raise NotApplicable("the resident vector index is not loaded yet (it loads on the first recall)")
        with env.db.read() as s:
            stored = {t: s.vectors.count_embedded(t, held[t][1], ctx.state.stale_range(t)) for t in held}
        if env.db.data_version() != before:
            raise NotApplicable("another process wrote to the file during the comparison; run again")
    drift = []
    for table, (count, dim) in held.items():
        if count != stored[table] or (ctx.state.dim is not None and dim != ctx.state.dim):
            drift.append({"table": table, "index_rows": count, "table_rows": stored[table], "index_dim": dim,
                          "recorded_dim": ctx.state.dim})
    return drift


def detect_index(ctx: Context) -> list[Issue]:
    drift = _index_drift(ctx)
    return [{"tables": drift, "repairable": len(drift)}] if drift else []


def fix_index(ctx: Context, issue: Issue) -> dict[str, Any]:
    assert ctx.env.resident is not None  # detect found drift, so an index exists
    ctx.env.resident.invalidate()
    return {"fixed": len(issue["tables"]), "action": "resident index dropped; it reloads on the next recall"}
