"""The process's own state as the tools see it: the no-persist pause, the task queue, the
operating context, statistics, and the update check (the check itself: cpersona/updates/).

Status answers (persistence_status, get_queue_status) carry `update_notice` while a newer
release exists or the running one was yanked; recall carries it once (service/recall.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from cpersona.jobs.task_queue import TaskQueue
from cpersona.policy import validate
from cpersona.policy.pause import MAX_TTL_SECONDS, Pause
from cpersona.policy.projects import OperatingContext
from cpersona.service.identity import IdentityService
from cpersona.service.outcomes import Report
from cpersona.storage import Database
from cpersona.updates.checker import UpdateCheck


@dataclass(frozen=True, eq=False)
class StatusService:
    """pause / resume / persistence_status, get_queue_status, get_operating_context, stats,
    check_update over the engine's collaborators (`identity` describes the stored vectors)."""

    db: Database
    queue: TaskQueue
    pause: Pause
    operating_context: OperatingContext
    updates: UpdateCheck
    identity: IdentityService

    def _with_update_notice(self, out: Report) -> Report:
        """`out` plus `update_notice` while a newer release exists or the running one was yanked."""
        notice = self.updates.status_notice()
        return {**out, "update_notice": notice} if notice else out

    # ------------------------------------------------------------------ pause
    def pause_persistence(self, ttl_seconds: object = 1800) -> Report:
        """Turn every write tool into a no-op for `ttl_seconds` (1..86400), process-wide.
        A second call replaces the deadline. Returns {paused, expires_at, ttl_seconds, scope}."""
        ttl = validate.limit("ttl_seconds", ttl_seconds, maximum=MAX_TTL_SECONDS)
        return self.pause.pause(ttl)

    def resume_persistence(self) -> Report:
        """End the pause now. Returns {paused: false, was_active, scope}."""
        out = self.pause.resume()
        self.queue.wake()
        return out

    def persistence_status(self) -> Report:
        """{paused, expires_at, ttl_remaining_seconds, scope, update_notice?} (expiry checked lazily)."""
        return self._with_update_notice(self.pause.status())

    # ------------------------------------------------------ queue, context, stats
    def queue_status(self) -> Report:
        """Body of get_queue_status (jobs/task_queue.py), plus update_notice?."""
        return self._with_update_notice(self.queue.status())

    def get_operating_context(self, section: object = "") -> Report:
        """Body of get_operating_context: the overview, or one doctrine section."""
        return self.operating_context.describe(validate.text("section", section, max_chars=validate.MAX_ID_CHARS))

    def stats(self) -> Report:
        """Counts per agent, the database file and size, FTS state (`fts_problem`: why the
        full-text index is unusable, '' when fine), the failure conditions now affecting the
        file (`storage_conditions`: busy, disk full, …), the stored vectors' model
        (`vector_report`: rows awaiting re-embedding, vectors of an unrecorded model), the task
        queue (for `cpersona stats`), and the schema version stamped in the file
        (`file_schema_version`: 13 for ours and the original 2.5 line; up to 21 for a file of
        the original's 2.6 line, which we open in place without re-stamping it)."""
        with self.db.read() as s:
            agents = s.agents.stats()
            stamped = s.integrity.schema_version()
        return {**self.db.describe(), "file_schema_version": stamped, "fts": self.db.fts_enabled,
                "fts_problem": self.db.fts_problem,
                "storage_conditions": self.db.conditions.snapshot(), "agents": agents,
                **self.identity.vector_report(), "queue": self.queue.status()}

    # ---------------------------------------------------------------- updates
    def check_update(self, refresh: object = False, apply: object = False) -> Report:
        """Report the update check of this process: {enabled, distribution, running_version,
        state: newer|yanked|current|unpublished|unknown, latest, notice, source: cache|index,
        checked_at, checking, last_error?, install?}. `refresh` starts a fresh fetch and
        `apply` installs the offered release of this distribution into the running
        environment; both run in the background (call again for the outcome).

        Raises InvalidArgument when refresh/apply are not booleans."""
        return self.updates.report(validate.boolean("refresh", refresh), validate.boolean("apply", apply))
