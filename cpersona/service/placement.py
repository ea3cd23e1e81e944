"""Where a written row's vector goes (`Placement`): into the resident index after COMMIT, or
— without one — an embed task for the task queue in the same transaction, so a crash never
leaves a vector-less row without its task. Rows that a bulk write's undo removed leave the
resident index. Shared by the write tools, import and merge (and the recovery at start)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cpersona.index.resident import ResidentIndexes
from cpersona.jobs.task_queue import TaskQueue
from cpersona.storage import Session
from cpersona.storage.records import RowRef


@dataclass(frozen=True, eq=False)
class Placement:
    """The after-commit index step over the resident indexes and the task queue."""

    resident: ResidentIndexes
    queue: TaskQueue

    def place(self, s: Session, table: str, ref: RowRef, vec: np.ndarray | None, replaces: bool = False) -> None:
        """In the write transaction `s`: the row's vector goes to the resident index after
        COMMIT, or the row is queued for embedding. `replaces` = an existing row's text
        changed: its queued task is dropped (a new vector) or its stale vector taken out."""
        if vec is None:  # the vector comes later, from the task queue (same transaction)
            self.queue.enqueue_embed(s, table, ref)
            if replaces:
                s.after(lambda: self.resident.remove(table, ref.id))
            return
        if replaces:
            s.tasks.drop_embed(table, ref.id)
        s.after(lambda: self.resident.add(table, ref, vec))

    def forget(self, rows: list[tuple[str, int]]) -> None:
        """Rows (table, id) an undo or a roll-forward removed leave the resident index."""
        for table, row_id in rows:
            if table != "profiles":
                self.resident.remove(table, row_id)
