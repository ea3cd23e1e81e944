"""Managing stored rows: delete / lock / unlock, erase an agent, profiles (the process's
own state — pause, queue, statistics — is service/status.py).

Write tools check the pause FIRST and answer with their skipped body (service/paused.py).
Bad arguments raise InvalidArgument; a refused change (absent, locked, not owned) returns
{ok: false, error}. Ownership and lock checks are part of the changing statement
(storage/memories.py), so races cannot bypass them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from cpersona.calibration.runner import Calibration
from cpersona.config import Settings
from cpersona.errors import Refused, StorageUnavailable
from cpersona.index.resident import ResidentIndexes
from cpersona.policy import validate
from cpersona.policy.pause import Pause
from cpersona.service.bulkwrite import claimed
from cpersona.service.outcomes import AgentErased, Profile, ProfileUpdate, RowChange
from cpersona.service.paused import skipped_body
from cpersona.storage import Database, Session
from cpersona.util.text import sanitize
from cpersona.util.words import visible

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class AdminService:
    """The row and profile tools over the engine's collaborators."""

    settings: Settings
    db: Database
    resident: ResidentIndexes
    pause: Pause
    calibration: Calibration

    # ------------------------------------------------------------ row changes
    def delete_memory(self, memory_id: object, agent_id: object = None) -> RowChange:
        """Delete an unlocked memory. Returns {ok: true, deleted_id} | {ok: false, error}
        (not found, locked, not owned)."""
        return self._delete_row("delete_memory", "memories", "memory_id", memory_id, agent_id,
                                lambda s, row_id, owner: s.memories.delete(row_id, owner))

    def delete_episode(self, episode_id: object, agent_id: object = None) -> RowChange:
        """Delete an episode (episodes have no lock). {ok: true, deleted_id} | {ok: false, error}."""
        return self._delete_row("delete_episode", "episodes", "episode_id", episode_id, agent_id,
                                lambda s, row_id, owner: s.episodes.delete(row_id, owner))

    def _delete_row(self, tool: str, table: str, argument: str, raw_id: object, agent_id: object,
                    delete: Callable[[Session, int, str | None], object]) -> RowChange:
        """Guarded DELETE + its queued embed task in one transaction, then the resident index."""
        if (paused := skipped_body(self.pause, tool)) is not None:
            return paused
        row_id = validate.row_id(argument, raw_id)
        owner = validate.owner(agent_id)
        try:
            with self.db.write() as s:
                claimed(s, row_id, table)  # a row a merge is moving: refused, not resurrected at the target
                delete(s, row_id, owner)
                s.tasks.drop_embed(table, row_id)
                s.after(lambda: self.resident.remove(table, row_id))
        except Refused as err:
            return {"ok": False, "error": str(err)}
        return {"ok": True, "deleted_id": row_id}

    def lock_memory(self, memory_id: object, agent_id: object = None) -> RowChange:
        """Protect a memory from update_memory, delete_memory and repairs (not a ranking
        boost; delete_agent_data still removes it). Idempotent. {ok: true, locked_id}."""
        return self._set_locked("lock_memory", "locked_id", memory_id, agent_id, True)

    def unlock_memory(self, memory_id: object, agent_id: object = None) -> RowChange:
        """Remove the protection of lock_memory. Idempotent. {ok: true, unlocked_id}."""
        return self._set_locked("unlock_memory", "unlocked_id", memory_id, agent_id, False)

    def _set_locked(self, tool: str, key: str, memory_id: object, agent_id: object, locked: bool) -> RowChange:
        if (paused := skipped_body(self.pause, tool)) is not None:
            return paused
        mid = validate.row_id("memory_id", memory_id)
        owner = validate.owner(agent_id)
        try:
            with self.db.write() as s:
                claimed(s, mid)
                s.memories.set_locked(mid, owner, locked)
        except Refused as err:
            return {"ok": False, "error": str(err)}
        return {"ok": True, key: mid}  # type: ignore[misc]

    def delete_agent_data(self, agent_id: object) -> AgentErased:
        """Delete everything of one agent: memories (locked ones too), episodes, profiles and
        queued tasks, then its vectors in the resident index and its calibration state.
        Returns the count of each.

        The rows go in chunks of about 50 ms each (`Database.write_in_chunks`: a deleted
        memory also updates the FTS index, so 450k rows take seconds), so erasing a large
        agent never holds the write lock for long; a row the agent gains meanwhile is
        erased too. Raises StorageUnavailable when a chunk cannot be
        written (busy, disk full); the message says what was already erased, and calling
        again finishes the erase."""
        if (paused := skipped_body(self.pause, "delete_agent_data",
                                   agent_id=agent_id if isinstance(agent_id, str) else None)) is not None:
            return paused
        agent = validate.required_agent(agent_id, "whose data to delete")
        counts: dict[str, int] = {}

        def chunk(s: Session, rows: int) -> bool:
            deleted, done = s.agents.delete_agent_chunk(agent, rows)
            s.after(lambda: _add_counts(counts, deleted))
            s.after(lambda: self.resident.remove_agent(agent))
            return done

        try:
            self.db.write_in_chunks(chunk)
        except StorageUnavailable as err:
            if not any(counts.values()):
                raise
            self.resident.invalidate()  # the agent's remaining vectors are reloaded
            raise StorageUnavailable(f"{err}. The erase stopped part-way ({_described(counts)} were already "
                                     "deleted); call delete_agent_data again to finish it", err.kind,
                                     err.retry_after_ms) from err
        out: AgentErased = {"ok": True, "agent_id": agent, **counts, "deleted_calibration": 0}  # type: ignore[typeddict-item]
        try:
            out["deleted_calibration"] = self.calibration.forget_agent(agent)
        except Exception as err:
            log.exception("forgetting the calibration of agent %r failed", agent)
            out["calibration_warning"] = f"calibration state was not cleared: {type(err).__name__}: {err}"
        return out

    # --------------------------------------------------------------- profiles
    def get_profile(self, agent_id: object) -> Profile:
        """{profile: text or ""}."""
        agent = validate.identifier("agent_id", agent_id) or ""
        with self.db.read() as s:
            return {"profile": s.profiles.get(agent)}

    def update_profile(self, agent_id: object, profile: object) -> ProfileUpdate:
        """Replace the agent's profile with caller-computed text, cut to
        CPERSONA_MAX_PROFILE_LENGTH (`truncated: true`). Paused: the skipped body."""
        agent = validate.identifier("agent_id", agent_id) or ""
        given = validate.text("profile", profile, max_chars=max(4 * self.settings.max_profile_length, 1_000_000))
        if (paused := skipped_body(self.pause, "update_profile")) is not None:
            return paused
        if not visible(given):  # blank, or only invisible format characters (zero-width spaces, BOMs)
            return {"ok": True, "profiles_updated": 0, "reason": "empty profile"}
        text, cut = sanitize(given, self.settings.max_profile_length)
        if not visible(text):
            return {"ok": True, "profiles_updated": 0, "reason": "empty after sanitization"}
        with self.db.write() as s:
            s.journal.claim_profile(agent)  # an unfinished import's undo must not bring the old one back
            s.profiles.upsert(agent, text)
        out: ProfileUpdate = {"ok": True, "profiles_updated": 1, "length": len(text)}
        if cut:
            out["truncated"] = True
            out["max_length"] = self.settings.max_profile_length
        return out


def _add_counts(totals: dict[str, int], counts: dict[str, int]) -> None:
    for key, n in counts.items():
        totals[key] = totals.get(key, 0) + n


def _described(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {key.removeprefix('deleted_').replace('_', ' ')}" for key, n in counts.items() if n)
