"""Which model produced the stored vectors, and what a process may do about a change.

The identity is kept in the database (`cpersona_meta['vectors']`, see
`storage.meta.VectorState`). When the active backend's (model, dim) differs from the
recorded one, every row that existed at that moment (id ≤ boundary) is stale until it is
re-embedded in id order — by the server's task queue in the background, or by
`cpersona reembed` — the watermark advancing in the same transaction as each batch of new
vectors, so an interrupted run resumes where it stopped. Rows with id in
(watermark, boundary] are never loaded into the cosine ranking: two models' vectors are
never mixed.

Who may change the record (`decide`):
* the server and `cpersona reembed` are *authorities*: a different model starts the
  migration (the documented model-change path);
* any other command (recall, stats, store, import… from the CLI) is not: a mismatch is
  reported and that command searches by keyword only; it never re-records the model.
Either may record the first model of a database that holds no vector yet (nothing to
mix, nothing to flip), or adopt vectors stored without a record (`Legacy`, e.g. written by
the original CPersona) when a sample of them re-embedded by the active model matches.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpersona.storage import Session
from cpersona.storage.meta import TABLES, VectorState

__all__ = ["TABLES", "Legacy", "VectorState", "advance", "apply", "decide", "stale_count", "start_migration"]

#: Smallest cosine between a stored vector and the active model's vector of the same text
#: for the stored one to count as made by the active model (float32 round-off and batching
#: keep a same-model pair above 0.999; two different models stay far below).
SAME_MODEL_COSINE = 0.99
#: Rows re-embedded to verify vectors stored without a recorded model.
VERIFY_SAMPLE = 8
UNRECORDED = "unrecorded"


@dataclass(frozen=True)
class Legacy:
    """Vectors stored without a recorded model (the original CPersona never recorded one).

    rows: how many rows carry a vector; dim: their dimension (None when mixed);
    label: the original 2.6's per-row `embedding_model` label when unanimous, else
    "unrecorded"; same: a sample re-embedded by the active model matched (cosine ≥
    SAME_MODEL_COSINE for every sampled row).
    """

    rows: int
    dim: int | None
    label: str
    same: bool

    def describe(self) -> str:
        label = "" if self.label == UNRECORDED else f", labelled {self.label!r}"
        dim = f"{self.dim}-d" if self.dim else "mixed dimensions"
        return f"{self.rows} vectors of an unrecorded model ({dim}{label})"


def decide(state: VectorState, model: str, dim: int, authority: bool, legacy: Legacy | None) -> str:
    """What to do with the record: "keep" | "record" | "migrate" | "refuse" (see module doc)."""
    if state.model is None:
        if legacy is None or legacy.same:
            return "record"
        return "migrate" if authority else "refuse"
    if (state.model, state.dim) == (model, dim):
        return "keep"
    return "migrate" if authority else "refuse"


def apply(session: Session, model: str, dim: int, authority: bool, legacy: Legacy | None) -> tuple[VectorState, str]:
    """Decide on the record as it is inside this write transaction and write the result.
    Returns (the state now in force, the decision)."""
    state = session.meta.vector_state()
    action = decide(state, model, dim, authority, legacy)
    if action == "record":
        state = VectorState(model, dim, None, changed_now=True)
        session.meta.put_vector_state(state)
    elif action == "migrate":
        if state.model is None and legacy is not None:
            state = VectorState(legacy.label, legacy.dim, None)
        state = start_migration(session, state, model, dim)
    return state, action


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


def progress(session: Session, state: VectorState) -> dict | None:
    """{from_model, from_dim, to_model, to_dim, total, done, remaining} of the re-embedding
    in progress, or None."""
    if not state.pending:
        return None
    total = sum(session.meta.count_in_range(t, 0, state.pending["boundary"][t]) for t in TABLES)
    remaining = stale_count(session, state)
    return {"from_model": state.pending["from_model"], "from_dim": state.pending["from_dim"],
            "to_model": state.model, "to_dim": state.dim, "total": total, "done": total - remaining,
            "remaining": remaining}
