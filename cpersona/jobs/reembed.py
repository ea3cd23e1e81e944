"""Re-embed stored rows with the active model (`cpersona reembed`).

Walks the stale id range of each table (see `embedding.identity`) in id order, in
batches; each batch's vectors and the advanced watermark are committed in ONE
transaction, so an interrupted run loses at most the batch in flight and the next run
resumes after the last committed id. `everything=True` first marks the whole corpus
stale (for a same-dimension model swap the server cannot detect).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cpersona.embedding import identity
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.errors import EmbeddingError
from cpersona.storage import Database
from cpersona.storage.codec import to_blob

#: Seconds to wait for the bundled model to load.
LOAD_TIMEOUT = 600


@dataclass
class ReembedReport:
    """The active model and how many rows were re-embedded out of the stale total."""

    model: str
    dim: int
    rows: int
    total: int


def _ready(gateway: EmbeddingGateway) -> None:
    emb = gateway.embedder
    if emb is None:
        raise EmbeddingError("no embedding backend configured (CPERSONA_EMBEDDING_MODE=none)")
    wait = getattr(emb, "wait_ready", None)
    if wait is not None and not wait(LOAD_TIMEOUT):
        raise EmbeddingError(f"embedding model did not load: {getattr(emb, 'load_error', '')}")
    if emb.dim is None:
        gateway.embed_texts(["warm-up"])


def reembed(
    gateway: EmbeddingGateway,
    db: Database,
    batch: int = 32,
    everything: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ReembedReport:
    """Re-embed every stale row; returns counts. `progress(done, total)` after each batch.

    Raises:
        EmbeddingError: no backend configured, or it failed (progress so far is kept).
    """
    _ready(gateway)
    if gateway.reconcile() is None or gateway.embedder is None:
        raise EmbeddingError("embedding backend did not answer")
    with db.write() as s:
        state = s.meta.vector_state()
        if everything and state.model is not None and state.dim is not None:
            state = identity.start_migration(s, state, state.model, state.dim)
        total = identity.stale_count(s, state)
    done = 0
    for table in identity.TABLES:
        lo, hi = state.stale_range(table)
        while lo < hi:
            with db.read() as s:
                rows = s.vectors.texts_in_range(table, lo, hi, batch)
            vectors: np.ndarray | list[np.ndarray] = gateway.embedder.embed([r[1] for r in rows]) if rows else []
            lo = rows[-1][0] if rows else hi
            with db.write() as s:
                for (row_id, text), vec in zip(rows, vectors):
                    s.vectors.set_if_text(table, row_id, text, to_blob(vec), only_if_missing=False)
                identity.advance(s, table, lo)
            done += len(rows)
            if progress:
                progress(done, total)
    final = gateway.reconcile()
    if final is None or final.model is None or final.dim is None:
        raise EmbeddingError("embedding backend stopped answering at the end of the run (the rows done are kept)")
    return ReembedReport(final.model, final.dim, done, total)
