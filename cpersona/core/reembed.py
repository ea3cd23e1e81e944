"""Re-embed stored rows with the active model (`cpersona reembed`).

Walks the stale id range of each table (see `embedding.identity`) in id order, in
batches; each batch's vectors and the advanced watermark are committed in ONE
transaction, so an interrupted run loses at most the batch in flight and the next run
resumes after the last committed id. `everything=True` first marks the whole corpus
stale (for a same-dimension model swap the server cannot detect).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from cpersona.core.embedding import identity
from cpersona.core.embedding.base import EmbeddingError
from cpersona.core.engine import Engine
from cpersona.core.vectors import to_blob

#: table → (SELECT of the next batch after a watermark, UPDATE of one row's vector).
_SQL = {
    "memories": (
        "SELECT id, content FROM memories WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
        "UPDATE memories SET embedding = ? WHERE id = ? AND content = ?",
    ),
    "episodes": (
        "SELECT id, summary FROM episodes WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
        "UPDATE episodes SET embedding = ? WHERE id = ? AND summary = ?",
    ),
}


@dataclass
class ReembedReport:
    model: str
    dim: int
    rows: int
    total: int


def reembed(
    engine: Engine,
    batch: int = 32,
    everything: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ReembedReport:
    """Re-embed every stale row; returns counts. `progress(done, total)` after each batch.

    Raises:
        EmbeddingError: no backend configured, or it failed (progress so far is kept).
    """
    if engine.embedder is None:
        raise EmbeddingError("no embedding backend configured (CPERSONA_EMBEDDING_MODE=none)")
    wait = getattr(engine.embedder, "wait_ready", None)
    if wait is not None and not wait(600):
        raise EmbeddingError(f"embedding model did not load: {getattr(engine.embedder, 'load_error', '')}")
    engine.embed_texts(["warm-up"]) if engine.embedder.dim is None else None
    state = engine.reconcile_identity()
    if state is None:
        raise EmbeddingError("embedding backend did not answer")
    with engine.db.write() as conn:
        state = identity.read_state(conn)
        if everything:
            state = identity.start_migration(conn, state, state.model, state.dim)
        total = identity.stale_count(conn, state)
    done = 0
    for table, (select_sql, update_sql) in _SQL.items():
        lo, hi = state.stale_range(table)
        while lo < hi:
            with engine.db.read() as conn:
                rows = conn.execute(select_sql, (lo, hi, batch)).fetchall()
            if not rows:
                lo = hi
            else:
                vectors = engine.embedder.embed([r[1] for r in rows])
                lo = rows[-1][0]
            with engine.db.write() as conn:
                for row, vec in zip(rows, vectors if rows else []):
                    conn.execute(update_sql, (to_blob(vec), row[0], row[1]))
                identity.advance(conn, table, lo)
            done += len(rows)
            if progress:
                progress(done, total)
    final = engine.reconcile_identity()
    return ReembedReport(final.model, final.dim, done, total)
