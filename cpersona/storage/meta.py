"""The `cpersona_meta` key-value table (ours, beside schema v13): which embedding model made
the stored vectors (`vectors`) and whether a calibration file was written (`calibration`).
Values are JSON text; a malformed value reads as absent and is logged."""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

TABLES = ("memories", "episodes")
VECTORS_KEY = "vectors"
CALIBRATION_KEY = "calibration"
#: Kept by the PostgreSQL backend for itself (its layout revision); never copied between stores.
POSTGRES_LAYOUT_KEY = "postgres_layout"
#: The form of the word index's rows (`util.words.WORD_FORM_VERSION`) each backend wrote for
#: itself; a different one re-tokenises every memory at the next open. Never copied.
WORD_FORM_KEY = "word_form"


@dataclass
class VectorState:
    """Decoded `cpersona_meta['vectors']`: the model and dimension of the stored vectors,
    and the re-embedding in progress after a model change (`pending`):

        {"from_model", "from_dim", "boundary": {"memories": N, "episodes": M},
         "watermark": {"memories": n, "episodes": m}}

    Rows with id in (watermark, boundary] still hold the previous model's vectors."""

    model: str | None = None
    dim: int | None = None
    pending: dict | None = None
    changed_now: bool = field(default=False, compare=False)

    def stale_range(self, table: str) -> tuple[int, int]:
        """(watermark, boundary) of `table`; (0, 0) when nothing is pending."""
        if not self.pending:
            return 0, 0
        return self.pending["watermark"][table], self.pending["boundary"][table]

    def to_json(self) -> str:
        return json.dumps({"model": self.model, "dim": self.dim, "pending": self.pending})

    @classmethod
    def from_value(cls, data: Any) -> VectorState:
        """From the decoded meta value; an empty VectorState when none (or unreadable)."""
        if not isinstance(data, dict) or not data:
            return cls()
        return cls(data.get("model"), data.get("dim"), data.get("pending"))


def decode(key: str, text: str) -> Any:
    """A stored meta value decoded; {} (logged) when it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError) as err:
        log.warning("cpersona_meta[%r] is unreadable (%s)", key, err)
        return {}


class MetaRepo:
    """Reads and writes of `cpersona_meta` over one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def get(self, key: str) -> Any | None:
        """The decoded JSON value of `key`; None when absent, {} when unreadable."""
        row = self.conn.execute("SELECT value FROM cpersona_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else decode(key, row[0])

    def lock(self, key: str) -> None:
        """Hold `key` against other writers until COMMIT (read-merge-write): nothing to do on
        SQLite, whose write transaction (BEGIN IMMEDIATE) already excludes every other."""

    def put(self, key: str, value: Any) -> None:
        self.conn.execute("INSERT OR REPLACE INTO cpersona_meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def vector_state(self) -> VectorState:
        """The recorded vector identity; an empty VectorState when none (or unreadable)."""
        return VectorState.from_value(self.get(VECTORS_KEY))

    def put_vector_state(self, state: VectorState) -> None:
        self.conn.execute("INSERT OR REPLACE INTO cpersona_meta(key, value) VALUES (?, ?)",
                          (VECTORS_KEY, state.to_json()))

    def max_ids(self) -> dict[str, int]:
        """Largest id of memories and episodes (the boundary of a re-embedding)."""
        return {t: self.conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {t}").fetchone()[0] for t in TABLES}

    def count_in_range(self, table: str, lo: int, hi: int) -> int:
        """Rows of `table` with id in (lo, hi]."""
        return self.conn.execute(f"SELECT COUNT(*) FROM {table} WHERE id > ? AND id <= ?", (lo, hi)).fetchone()[0]
