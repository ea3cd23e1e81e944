"""Which model produced the stored vectors, and the re-embedding after a model change.

The identity is kept in the database (`cpersona_meta['vectors']`, see
`storage.meta.VectorState`). When the active backend's (model, dim) differs from the
recorded one, every row that existed at that moment (id ≤ boundary) is stale until
`cpersona reembed` walks it in id order, advancing the watermark in the same transaction as
each batch of new vectors — so an interrupted run resumes where it stopped. Rows with id in
(watermark, boundary] are never loaded into the cosine ranking: two models' vectors are
never mixed.
"""

from __future__ import annotations

from cpersona.storage import Session
from cpersona.storage.meta import TABLES, VectorState

__all__ = ["TABLES", "VectorState", "advance", "reconcile", "stale_count", "start_migration"]


def start_migration(session: Session, state: VectorState, model: str, dim: int) -> VectorState:
    """Mark every existing row stale and make (model, dim) the active identity."""
    pending = {
        "from_model": state.model,
        "from_dim": state.dim,
        "boundary": session.meta.max_ids(),
        "watermark": {t: 0 for t in TABLES},
    }
    new = VectorState(model, dim, pending, changed_now=True)
    session.meta.put_vector_state(new)
    return new


def reconcile(session: Session, model: str, dim: int) -> VectorState:
    """Compare the active backend with the recorded identity (write transaction). First
    use records it; a different model or dimension starts a migration (`changed_now`)."""
    state = session.meta.vector_state()
    if state.model is None:
        state = VectorState(model, dim, None)
        session.meta.put_vector_state(state)
        return state
    if (state.model, state.dim) == (model, dim):
        return state
    return start_migration(session, state, model, dim)


def advance(session: Session, table: str, watermark: int) -> VectorState:
    """Record that `table` rows up to `watermark` carry new vectors; finish when done."""
    state = session.meta.vector_state()
    if not state.pending:
        return state
    state.pending["watermark"][table] = max(state.pending["watermark"][table], watermark)
    if all(state.pending["watermark"][t] >= state.pending["boundary"][t] for t in TABLES):
        state.pending = None
    session.meta.put_vector_state(state)
    return state


def stale_count(session: Session, state: VectorState) -> int:
    """Rows still waiting for re-embedding."""
    return sum(session.meta.count_in_range(t, *state.stale_range(t)) for t in TABLES)
