"""`ServiceBase`: what `RecallService` (service/recall.py), the one service still mixed into
`Engine`, reads from it — the collaborators and the shared steps, which it delegates to
`Steps` (service/steps.py). Every other service is a plain class built by `Engine` with
its collaborators passed in; this base goes when RecallService is built the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cpersona.calibration.runner import Calibration
from cpersona.config import Settings
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.index.vector_index import VectorIndex
from cpersona.policy.pause import Pause
from cpersona.service.steps import Steps
from cpersona.storage import Database
from cpersona.updates.checker import UpdateCheck


class ServiceBase:
    """The Engine's attributes RecallService reads, and the shared steps as it calls them."""

    settings: Settings
    db: Database
    gateway: EmbeddingGateway
    calibration: Calibration
    pause: Pause
    updates: UpdateCheck
    steps: Steps

    def refresh_if_changed(self) -> None:
        """`Steps.refresh_if_changed`."""
        self.steps.refresh_if_changed()

    def indexes(self) -> dict[str, VectorIndex] | None:
        """`Steps.indexes`."""
        return self.steps.indexes()

    def gated(self, tool: str, agent_id: object, project_id: object, write: bool,
              run: Callable[[Any], Any]) -> Any:
        """`Steps.gated` (typed `Any` as RecallService's callers expect until it is converted)."""
        return self.steps.gated(tool, agent_id, project_id, write, run)
