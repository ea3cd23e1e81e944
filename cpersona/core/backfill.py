"""Background embedding of rows stored without a vector.

A row gets a NULL embedding when it was written while the backend could not answer (the
bundled model still loading, the /embed endpoint down). The NULL itself is the durable
marker: after a crash or restart the next run finds the same rows. This worker embeds
them in batches once the backend answers, writing a vector only if the row's text is
unchanged, and retries every CPERSONA_TASK_RETRY_DELAY seconds after a failure.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from cpersona.core.vectors import to_blob

if TYPE_CHECKING:
    from cpersona.core.engine import Engine

log = logging.getLogger(__name__)

BATCH = 32
#: table → (text column, SQL selecting rows to embed, SQL writing one vector).
_TABLES = {
    "memories": (
        "SELECT id, content, agent_id, project_id, channel, created_at FROM memories "
        "WHERE embedding IS NULL ORDER BY id LIMIT ?",
        "UPDATE memories SET embedding = ? WHERE id = ? AND content = ? AND embedding IS NULL",
    ),
    "episodes": (
        "SELECT id, summary, agent_id, project_id, channel, created_at FROM episodes "
        "WHERE embedding IS NULL ORDER BY id LIMIT ?",
        "UPDATE episodes SET embedding = ? WHERE id = ? AND summary = ? AND embedding IS NULL",
    ),
}


class Backfill:
    """Daemon thread owned by an Engine. `wake()` after a vector-less write."""

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.embedded = 0
        self.last_error = ""

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cpersona-backfill", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def pending(self) -> int:
        """Rows still waiting for a vector (memories + episodes)."""
        with self.engine.db.read() as conn:
            return sum(conn.execute(f"SELECT COUNT(*) FROM {t} WHERE embedding IS NULL").fetchone()[0] for t in _TABLES)

    def _run(self) -> None:
        delay = self.engine.settings.task_retry_delay
        while not self._stop.is_set():
            if not self.engine.embedding_ready():
                self._stop.wait(0.2)
                continue
            try:
                progressed = self.run_once()
            except Exception as err:  # noqa: BLE001 — the worker must survive; the error is logged and kept
                log.exception("embedding backfill failed")
                self.last_error = f"{type(err).__name__}: {err}"
                progressed = None
            if progressed is None:
                self._wake.wait(delay)
            elif progressed == 0:
                self._wake.wait()
            self._wake.clear()

    def run_once(self) -> int | None:
        """Embed one batch per table. Returns rows embedded (0 = nothing left), or None
        when the backend failed (retry later)."""
        total = 0
        for table, (select_sql, update_sql) in _TABLES.items():
            with self.engine.db.read() as conn:
                rows = conn.execute(select_sql, (BATCH,)).fetchall()
            if not rows:
                continue
            vectors = self.engine.embed_texts([r[1] for r in rows])
            if vectors is None:
                self.last_error = "embedding backend unavailable"
                return None
            with self.engine.db.write() as conn:
                written = [r for r, v in zip(rows, vectors) if conn.execute(update_sql, (to_blob(v), r[0], r[1])).rowcount]
            for row, vec in zip(rows, vectors):
                if row in written:
                    self.engine.index_add(table, row[0], row[2], row[3], row[4], row[5], vec)
            total += len(rows)
        self.embedded += total
        return total
