"""The health tools — check_health and deep_check — over the running server's collaborators,
and the background integrity check at start (a damaged file is reported on stderr at
once, not discovered by the first recall that touches the bad page)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from cpersona.config import Settings
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.errors import StatementTimeout
from cpersona.health import HealthEnv, check_health, deep_check
from cpersona.index.resident import ResidentIndexes
from cpersona.jobs.task_queue import TaskQueue
from cpersona.policy.pause import Pause
from cpersona.policy.projects import OperatingContext
from cpersona.service.outcomes import Report
from cpersona.service.steps import Steps
from cpersona.storage import Database
from cpersona.storage.integrity import is_damage

log = logging.getLogger(__name__)


@dataclass(eq=False)
class HealthService:
    """check_health / deep_check over the engine's collaborators, and the integrity check at
    start (its thread is started and stopped by `Engine`)."""

    settings: Settings
    db: Database
    gateway: EmbeddingGateway
    resident: ResidentIndexes
    queue: TaskQueue
    pause: Pause
    operating_context: OperatingContext
    steps: Steps
    #: Why the file is served read-only ('' = it is not: `open_database`), or what the
    #: start-up check found (set by its thread).
    damage: str = ""
    _integrity: tuple[threading.Thread, threading.Event] | None = field(default=None, init=False, repr=False)

    def health_env(self) -> HealthEnv:
        """The collaborators a health run uses in this process."""
        has_backend = self.gateway.embedder is not None
        return HealthEnv(
            settings=self.settings, db=self.db, embedder=self.gateway.embedder,
            embed=self.gateway.embed_batch if has_backend else None, keep_vector=self.gateway.vector_for_write,
            resident=self.resident, operating_context=self.operating_context,
            enqueue_embed=self.queue.enqueue_embed, after_repairs=self._after_repairs,
            refresh=self.steps.refresh_if_changed, pause=self.pause,
            queue_draining=lambda: self.queue.running() and self.gateway.embedder is not None,
        )

    def _after_repairs(self) -> None:
        self.resident.invalidate()
        self.queue.notify()

    def check_health(self, agent_id: object = "", fix: object = False, checks: object = None) -> Report:
        """Integrity checks of the store, with repairs when `fix` (cpersona/health/runner.py).
        While paused, or on a file served read-only, the run is a report only. Raises
        InvalidArgument for arguments of the wrong type."""
        self.steps.refresh_if_changed()
        out = check_health(self.health_env(), agent_id, fix, checks)
        if self.damage:
            out["database_damage"] = self.damage
        return out

    def deep_check(self, agent_id: object, fix: object = False, checks: object = None) -> Report:
        """Per-agent content inspections (cpersona/health/deep.py); fixes only when `fix`."""
        self.steps.refresh_if_changed()
        return deep_check(self.health_env(), agent_id, fix, checks)

    def start_integrity_watch(self) -> None:
        """Run SQLite's quick_check once in the background; damage is logged as an error and
        kept in `damage` (check_health reports it too). `stop_integrity_watch` ends it."""
        stop = threading.Event()
        thread = threading.Thread(target=self._integrity_once, args=(stop,), name="cpersona-integrity", daemon=True)
        self._integrity = (thread, stop)
        thread.start()

    def stop_integrity_watch(self) -> None:
        """Stop the start-up check and wait for it (before the database is closed: a
        connection must never be closed under a running statement)."""
        if self._integrity is not None:
            thread, stop = self._integrity
            stop.set()
            thread.join()

    def _integrity_once(self, stop: threading.Event) -> None:
        try:
            with self.db.read() as s:
                messages = [m for m in s.integrity.quick_check(3, stop=stop.is_set) if m != "ok"]
        except StatementTimeout:
            return
        except Exception as err:  # noqa: BLE001 — a closed engine ends the check; a damaged file is the finding
            if not is_damage(err):
                log.debug("start-up integrity check not run: %s", err)
                return
            self.damage = self.damage or str(err)  # already named and logged by the storage layer
            return
        if messages:
            found = "; ".join(messages[:3])
            self.db.conditions.observe("corrupt", found, (
                f"database file {self.db.path} is damaged ({found}). Keep a copy of it (with its -wal file), then "
                f"run `cpersona checkup --db {self.db.path}` and restore a backup or rebuild from an export"))
            self.damage = self.damage or found
