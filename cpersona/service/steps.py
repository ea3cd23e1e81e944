"""The steps several services share, as one collaborator they receive (`Steps`): noticing
another process's commit, the resident indexes of the active model, and the operating
context's project rules around a tool. `Engine` (service/engine.py) builds it once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.index.resident import ResidentIndexes
from cpersona.index.vector_index import VectorIndex
from cpersona.policy.projects import OperatingContext

#: Extra keys of a write refused by the operating context's registry (reject mode).
REFUSED: dict[str, dict[str, Any]] = {
    "store": {"result": "rejected"}, "archive_episode": {"episode_id": None},
    "declare_associations": {"result": "rejected", "entities": [], "mentions": 0, "relations": [], "dropped": []},
}

#: A tool's answer (a TypedDict of service/outcomes.py, or an open report).
Answer = TypeVar("Answer", bound=Mapping[str, Any])


@dataclass(frozen=True, eq=False)
class Steps:
    """The shared steps over the embedding gateway, the resident indexes and the operating
    context. Thread-safe: every method may be called from any thread."""

    gateway: EmbeddingGateway
    resident: ResidentIndexes
    operating_context: OperatingContext

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

    def gated(self, tool: str, agent_id: object, project_id: object, write: bool,
              run: Callable[[object], Answer]) -> Answer:
        """Run `run(project_id)` behind the operating context's project rules: "@auto"
        resolved, the registry checked (a write outside it is refused in reject mode),
        `resolved_project_id` / `operating_context_warning` added to the answer.

        `agent_id` and `project_id` are the caller's arguments, not yet validated: `run`
        receives the resolved project, or the argument unchanged, and validates it. A refusal
        answers `{ok: false, error, operating_context_revision}` plus the tool's keys of
        `REFUSED` (store: `reason` too) — the tool's failure shape, hence the cast."""
        gate = self.operating_context.gate(agent_id, project_id, write)
        if gate.refusal is not None:
            body = gate.refused(REFUSED.get(tool, {}))
            if tool == "store":
                body["reason"] = gate.refusal
            return cast(Answer, body)
        out = run(gate.project_id)
        return cast(Answer, {**out, **gate.extras}) if gate.extras else out
