"""`ServiceBase`: the collaborators every service mixin works with, and the steps they share
(noticing another process's commit, the resident indexes, the operating context's project
rules). `Engine` (service/engine.py) builds the collaborators and composes the mixins."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cpersona.calibration.runner import Calibration
from cpersona.config import Settings
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.index.resident import ResidentIndexes
from cpersona.index.vector_index import VectorIndex
from cpersona.jobs.task_queue import TaskQueue
from cpersona.policy.pause import Pause
from cpersona.policy.projects import OperatingContext
from cpersona.storage import Database
from cpersona.updates.checker import UpdateCheck

#: Extra keys of a write refused by the operating context's registry (reject mode).
REFUSED: dict[str, dict[str, Any]] = {"store": {"result": "rejected"}, "archive_episode": {"episode_id": None}}


class ServiceBase:
    """Attributes set by `Engine`, and the steps shared by the tools."""

    settings: Settings
    db: Database
    gateway: EmbeddingGateway
    resident: ResidentIndexes
    queue: TaskQueue
    pause: Pause
    calibration: Calibration
    operating_context: OperatingContext
    updates: UpdateCheck

    def refresh_if_changed(self) -> None:
        """Another process committed to the file: drop the resident indexes and re-read the
        recorded vector identity (atomically, under the index lock)."""
        with self.resident.lock:
            if self.resident.changed_elsewhere():
                self.gateway.reread_state()

    def indexes(self) -> dict[str, VectorIndex] | None:
        """The resident indexes for the backend's dimension, loaded on first use; None when
        the dimension is not known yet (no backend, or HTTP before its first answer)."""
        dim = self.gateway.dim
        if dim is None:
            return None
        if self.gateway.current_state() is None and self.gateway.reconcile() is None:
            return None
        with self.resident.lock:
            state = self.gateway.current_state()
            return self.resident.get(dim, state) if state is not None and state.model is not None else None

    def with_update_notice(self, out: dict[str, Any]) -> dict[str, Any]:
        """`out` plus `update_notice` while a newer release exists or the running one was
        yanked (status answers; recall gets it once: service/recall.py)."""
        notice = self.updates.status_notice()
        return {**out, "update_notice": notice} if notice else out

    def gated(self, tool: str, agent_id: Any, project_id: Any, write: bool, run: Callable[[str | None], Any]) -> Any:
        """Run `run(resolved project_id)` behind the operating context's project rules:
        "@auto" resolved, the registry checked (a write outside it is refused in reject
        mode), `resolved_project_id` / `operating_context_warning` added to the answer."""
        gate = self.operating_context.gate(agent_id, project_id, write)
        if gate.refusal is not None:
            body = gate.refused(REFUSED.get(tool, {}))
            if tool == "store":
                body["reason"] = gate.refusal
            return body
        out = run(gate.project_id)
        return {**out, **gate.extras} if gate.extras else out
