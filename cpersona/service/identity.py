"""The server's side of the embedding model's identity (`embedding.identity`): deciding on
the database's model at start, queueing the background re-embedding after a change, and
describing the stored vectors for `cpersona stats`.

Only an Engine built with `model_authority=True` (the server, `cpersona reembed`) may
change the database's recorded model; a CLI command opened with other embedding settings
reports the mismatch and searches by keyword. (A read-only command that re-recorded the
model would make the running server drop every stored vector from its search.)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from cpersona.config import Settings
from cpersona.embedding import identity
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.index.resident import ResidentIndexes
from cpersona.jobs.task_queue import TaskQueue
from cpersona.service.outcomes import Report
from cpersona.storage import Database
from cpersona.storage.meta import VectorState

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class IdentityService:
    """Model identity at start and in statistics. `Engine` hands `prepare` to the task queue
    and `decided` to the gateway."""

    settings: Settings
    db: Database
    gateway: EmbeddingGateway
    resident: ResidentIndexes
    queue: TaskQueue

    def prepare(self) -> bool:
        """Run by the task queue's worker before its first pass (server start): wait for the
        backend, decide on the database's model (`EmbeddingGateway.reconcile`) and, after a
        change, queue the re-embedding. False = not ready yet (called again shortly)."""
        emb = self.gateway.embedder
        if emb is None:
            return True
        if not emb.ready():
            return False
        if self.gateway.dim is None and self.gateway.embed_texts(["cpersona start probe"]) is None:
            return False
        state = self.gateway.current_state() or self.gateway.reconcile()
        if state is None:
            return False
        self._queue_reembed(state)
        return True

    def decided(self, state: VectorState) -> None:
        """The recorded identity was (re)decided: reload the resident indexes, and queue the
        re-embedding when this process started a migration."""
        self.resident.invalidate()
        if state.changed_now:
            self._queue_reembed(state)

    def _queue_reembed(self, state: VectorState) -> None:
        if not (state.pending and self.gateway.authority and self.settings.task_queue_enabled):
            return
        with self.db.write() as s:
            added = s.tasks.enqueue_reembed()
        if added:
            log.info("re-embedding %s → %s queued in the background", state.pending["from_model"], state.model)
            self.queue.wake()

    def vector_report(self) -> Report:
        """What made the stored vectors: {stored_model, stored_dim, awaiting_reembed,
        reembed (progress) | None, unrecorded ({rows, dims, labels}) | None}."""
        with self.db.read() as s:
            state = s.meta.vector_state()
            progress = identity.progress(s, state)
            census = s.vectors.census() if state.model is None else {}
            labels = s.vectors.model_labels() if census else {}
        return {"stored_model": state.model, "stored_dim": state.dim,
                "awaiting_reembed": progress["remaining"] if progress else 0, "reembed": progress,
                "unrecorded": {"rows": sum(census.values()), "dims": census, "labels": labels} if census else None}
