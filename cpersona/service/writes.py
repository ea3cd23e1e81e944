"""Writing text rows: store, archive_episode, update_memory — and the one write step they
share (`_write_embedded`):

    embed the text (no lock held) → ONE transaction: check the database still records this
    backend's model, write the row with its vector — or without one plus its embed task →
    after COMMIT, put the vector into the resident index (or take the stale one out).

So a crash never leaves a vector-less row without its task, and the index sees writes in
commit order. Dedup skips, never overwrites: a memory already visible in its own
agent/project/channel scope (same content, or same message id) is answered `skipped`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import numpy as np

from cpersona.config import Settings
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.errors import InvalidArgument, Refused
from cpersona.jobs.task_queue import TaskQueue
from cpersona.policy import drafts, validate
from cpersona.policy.pause import Pause
from cpersona.service.bulkwrite import claimed
from cpersona.service.outcomes import ArchiveResult, RowChange, StoreResult
from cpersona.service.paused import skipped_body
from cpersona.service.placement import Placement
from cpersona.service.steps import Steps
from cpersona.storage import Database, Session
from cpersona.storage.codec import to_blob
from cpersona.storage.records import RowRef

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class WriteService:
    """The write tools over the engine's collaborators."""

    settings: Settings
    db: Database
    gateway: EmbeddingGateway
    queue: TaskQueue
    pause: Pause
    steps: Steps
    placement: Placement
    #: the process-wide pool that embeds writes (owned by `Engine`; apart from the queries'
    #: pool, which must not queue behind a burst of stores)
    pool: ThreadPoolExecutor

    def _write_embedded(self, table: str, text: str, write: Callable[[Session, bytes | None], RowRef | None],
                        replaces: bool = False) -> tuple[RowRef | None, bool]:
        """The shared write step (module doc). `write(session, blob)` writes the row and
        returns its ref (None = nothing written); `replaces` = an existing row's text changed.
        A bundled model still loading is waited for up to CPERSONA_MODEL_WAIT_SECONDS, a
        vector then for up to CPERSONA_EMBED_WAIT_SECS (a backend busy or stalled: the row is
        written without one, `embedded: false`, and its task embeds it later).
        Returns (ref, embedded)."""
        self.gateway.wait_for_backend(self.settings.model_wait_seconds)
        vec = self._vector_within(text)
        self.steps.refresh_if_changed()
        with self.db.write() as s:
            vec = self.gateway.vector_for_write(s, vec)
            ref = write(s, to_blob(vec) if vec is not None else None)
            if ref is not None:
                self.placement.place(s, table, ref, vec, replaces)
        if ref is not None and vec is None:
            self.queue.notify()
        return ref, vec is not None

    def _vector_within(self, text: str) -> np.ndarray | None:
        """The text's vector within CPERSONA_EMBED_WAIT_SECS, else None (the task queue embeds
        it). None at once while the backend is known not to answer (`not_answering`): a burst
        of writes to a stopped worker then neither waits nor holds a thread each."""
        wait = self.settings.embed_wait_secs
        if self.gateway.not_answering(wait) is not None:
            return None
        pending = self.pool.submit(self.gateway.embed_one, text)
        try:
            return pending.result(timeout=wait)
        except FutureTimeout:
            log.info("a write went on without its vector (none within %g s); the task queue embeds it",
                     self.settings.embed_wait_secs)
            return None

    def _embedded_part(self, text: str, embedded: bool) -> dict[str, int]:
        """`{embedded_chars: n}` when the row's vector stands for only the first n characters
        of `text` (the bundled model embeds at most `max_chars`), else {}."""
        limit = getattr(self.gateway.embedder, "max_chars", None)
        return {"embedded_chars": limit} if embedded and isinstance(limit, int) and len(text) > limit else {}

    # ------------------------------------------------------------------ tools
    def store(self, agent_id: object, content: object, **message: object) -> StoreResult:
        """Write one memory. Dedup = skip, never upsert.

        Keyword args: msg_id, source (dict, or a string: see util.text.normalize_source),
        timestamp (ISO-8601), metadata (dict), channel, project_id (the operating context's
        project rules apply), lock (bool: lock the new memory in the same transaction).
        Returns `{ok: true, result: "stored", id, embedded, embedded_chars?, locked?, truncated?, original_length?,
        max_length?}` | `{ok: true, result: "skipped", reason, id?}` | `{ok: false, result:
        "rejected", reason}` (reason names the argument and rule). Content longer than
        CPERSONA_MAX_CONTENT_LENGTH is cut to it and the answer says so. While persistence is
        paused: the skipped body (`persisted: false`), nothing written.
        """
        project = message.pop("project_id", "")
        return self.steps.gated("store", agent_id, project, True,
                                lambda p: self._store(agent_id, content, project_id=p, **message))

    def _store(self, agent_id: object, content: object, lock: object = False, **message: object) -> StoreResult:
        if (paused := skipped_body(self.pause, "store")) is not None:
            return paused
        try:
            locking = validate.boolean("lock", lock)
            draft, cuts = drafts.prepare_memory(agent_id, content, max_content=self.settings.max_content_length,
                                                max_metadata=self.settings.max_metadata_length, **message)
        except InvalidArgument as err:
            return {"ok": False, "result": "rejected", "reason": str(err)}
        with self.db.read() as s:
            dup = s.memories.find_duplicate(draft)
            vouched_in_bulk = dup is not None and s.journal.journaled("memories", dup[1])
        if dup:
            try:
                if vouched_in_bulk:  # the answer vouches for a row an unfinished import could undo
                    with self.db.write() as s:
                        claimed(s, dup[1])
            except Refused as err:
                return {"ok": False, "result": "rejected", "reason": str(err)}
            return _skipped(dup[0], dup[1], cuts)
        found: list[tuple[str, int]] = []

        def write(s: Session, blob: bytes | None) -> RowRef | None:
            again = s.memories.find_duplicate(draft)
            if again:
                found.append(again)
                return None
            ref = s.memories.insert(draft, blob)
            if ref is not None and locking:
                s.memories.set_locked(ref.id, None, True)
            return ref

        ref, embedded = self._write_embedded("memories", draft.content, write)
        if found:
            return _skipped(found[0][0], found[0][1], cuts)
        if ref is None:
            return _skipped("duplicate (unique index)", None, cuts)
        out: StoreResult = {"ok": True, "result": "stored", "id": ref.id, "embedded": embedded,
                            **self._embedded_part(draft.content, embedded)}  # type: ignore[typeddict-item]
        if locking:
            out["locked"] = True
        given = message.get("timestamp")
        if given not in (None, "") and draft.timestamp != given:  # stored as its UTC instant (validate.timestamp)
            out["timestamp"] = draft.timestamp
        out.update(drafts.cut_report(cuts))  # type: ignore[typeddict-item]
        return out

    def archive_episode(self, agent_id: object, summary: object, **fields: object) -> ArchiveResult:
        """Store a caller-computed session summary; moves the episode boundary (older
        memories rank lower). Keyword args: keywords, history (list of {timestamp}),
        resolved, channel, project_id. Returns `{ok: true, episode_id, embedded, truncated?,
        original_length?, max_length?}` (a summary or keywords over CPERSONA_MAX_CONTENT_LENGTH
        is cut) or `{ok: false, episode_id: null, error}`. Paused: the skipped body."""
        project = fields.pop("project_id", "")
        return self.steps.gated("archive_episode", agent_id, project, True,
                                lambda p: self._archive(agent_id, summary, project_id=p, **fields))

    def _archive(self, agent_id: object, summary: object, **fields: object) -> ArchiveResult:
        if (paused := skipped_body(self.pause, "archive_episode")) is not None:
            return paused
        try:
            draft, cuts = drafts.prepare_episode(agent_id, summary, max_content=self.settings.max_content_length,
                                                 **fields)
        except InvalidArgument as err:
            return {"ok": False, "episode_id": None, "error": str(err)}
        ref, embedded = self._write_embedded("episodes", draft.summary, lambda s, blob: s.episodes.insert(draft, blob))
        out: ArchiveResult = {"ok": True, "episode_id": ref.id if ref else None, "embedded": embedded,
                              **self._embedded_part(draft.summary, embedded)}  # type: ignore[typeddict-item]
        return {**out, **drafts.cut_report(cuts)}  # type: ignore[typeddict-item]

    def update_memory(self, memory_id: object, content: object, agent_id: object = None) -> RowChange:
        """Replace a memory's content; re-embeds it, keeps its id, msg_id, source, timestamp,
        channel and project. agent_id None/'' = no ownership check. Returns
        {ok: true, updated_id, embedded} | {ok: false, error} (not found, locked, not owned,
        same content as another memory of the same agent/project/channel)."""
        if (paused := skipped_body(self.pause, "update_memory")) is not None:
            return paused
        mid = validate.row_id("memory_id", memory_id)
        owner = validate.owner(agent_id)
        clean, cut = drafts.clean_text("content", content, self.settings.max_content_length)
        try:
            with self.db.read() as s:
                s.memories.check_writable(mid, owner)  # answer early, before embedding
            _, embedded = self._write_embedded("memories", clean, lambda s, blob: s.memories.update_content(
                mid, owner, clean, blob) if claimed(s, mid) else None, replaces=True)
        except Refused as err:
            return {"ok": False, "error": str(err)}
        out: RowChange = {"ok": True, "updated_id": mid, "embedded": embedded,
                          **self._embedded_part(clean, embedded)}  # type: ignore[typeddict-item]
        return {**out, **drafts.cut_report([cut] if cut else [])}  # type: ignore[typeddict-item]


def _skipped(reason: str, row_id: int | None, cuts: list[drafts.Cut]) -> StoreResult:
    """A store answered by a row already there; the cut report says when the text compared
    with it was the cut one (an over-long text cut to the same text as a stored row)."""
    out: StoreResult = {"ok": True, "result": "skipped", "reason": reason}
    if row_id is not None:
        out["id"] = row_id
    out.update(drafts.cut_report(cuts))  # type: ignore[typeddict-item]
    return out
