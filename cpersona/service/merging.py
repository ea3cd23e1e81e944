"""merge_memories (one agent's rows copied or moved to another) and migrate_channel_axis
(memories filed under the bridge channel 'discord' moved to their concrete channel).

Merge rules (the original's, written as one journaled bulk operation):
* memories: empty content skipped; same message id already at the target (same project)
  skipped; else inserted with every field (vector, lock, created_at, recall statistics),
  a duplicate of the target's content skipped by the unique index;
* episodes: empty summary skipped; the same summary in the same project and channel at
  the target skipped; else inserted keeping created_at;
* profiles: the target's profile of the same user_id is kept (`strategy` "skip") or
  replaced by the source's ("prefer_source"); else the source's is copied (updated now);
* a vector is carried only when the active model made it (a row still waiting for its
  re-embedding is queued instead);
* `mode` "move" deletes exactly the source rows that were copied, after the commit point;
  the source's queued tasks and calibration are removed only when nothing is left of it, and
  its declared associations then too, when every one of them was carried;
* the source's declared associations are carried to the target with the commit point, pointed
  at the copies (or at the target's equal rows a duplicate was skipped for: service/carrying.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cpersona.calibration.runner import Calibration
from cpersona.errors import InvalidArgument
from cpersona.index.resident import ResidentIndexes
from cpersona.jobs.task_queue import TaskQueue
from cpersona.policy import validate
from cpersona.policy.pause import Pause
from cpersona.service.bulkwrite import BulkRun
from cpersona.service.carrying import carry
from cpersona.service.exporting import Progress
from cpersona.service.outcomes import Report
from cpersona.service.paused import skipped_body
from cpersona.service.placement import Placement
from cpersona.storage import Database, Session
from cpersona.storage.codec import from_blob
from cpersona.storage.meta import VectorState
from cpersona.storage.records import Graph
from cpersona.util.threads import cycle_collection_paused
from cpersona.util.time import utc_now_iso

_KIND = {"memories": "mem", "episodes": "ep"}

STRATEGIES = ("skip", "prefer_source")
MODES = ("copy", "move")
_SAMPLES = 5
_INVALID_IDS = 10


@dataclass
class _Merge:
    """The settings and the running counts of one merge."""

    target: str
    strategy: str
    state: VectorState
    out: dict[str, Any]
    dry: bool
    move: bool
    graph: Graph
    refs: dict[str, str] = field(default_factory=dict)  # source record ref → the ref of its copy (or equal row)
    graph_whole: bool = True  # every declaration of the source was carried


def _equal(s: Session, table: str, row: dict[str, Any], target: str) -> int | None:
    """The target's row a copy of `row` was skipped for (same message id, else same text)."""
    if table == "episodes":
        return s.bulk.episode_with_summary(target, row["project_id"], row["channel"], row["summary"])
    if row["msg_id"] and (found := s.bulk.memory_with_msg_id(target, row["project_id"], row["msg_id"])):
        return found
    return s.bulk.memory_with_content(target, row["project_id"], row["channel"], row["content"])


def _vector(state: VectorState, table: str, row: dict[str, Any]) -> bytes | None:
    blob = row.get("embedding")
    lo, hi = state.stale_range(table)
    if blob is None or state.dim is None or len(blob) != 4 * state.dim or lo < row["id"] <= hi:
        return None
    return blob


@dataclass(frozen=True, eq=False)
class MergeService:
    """merge_memories and migrate_channel_axis over the engine's collaborators."""

    db: Database
    resident: ResidentIndexes
    queue: TaskQueue
    pause: Pause
    calibration: Calibration
    placement: Placement

    def merge_memories(self, source_agent_id: object, target_agent_id: object, strategy: object = "skip",
                       mode: object = "copy", dry_run: object = False, *,
                       progress: Progress | None = None) -> Report:
        """Copy (or move) every memory, episode and profile of one agent to another (module
        doc). Returns {ok: true, dry_run, source_agent_id, target_agent_id, strategy, mode,
        merged_memories, skipped_memories, merged_episodes, skipped_episodes,
        profile_copied, skipped_profile, source_deleted?, left_at_source?}. Raises
        InvalidArgument: empty agents, the same agent twice, unknown strategy / mode."""
        if dry_run is not True and (paused := skipped_body(self.pause, "merge_memories")) is not None:
            return paused
        dry = validate.boolean("dry_run", dry_run)
        source = validate.required_agent(source_agent_id, "to merge from", "source_agent_id")
        target = validate.identifier("target_agent_id", target_agent_id)
        if not target or target == source:
            raise InvalidArgument("target_agent_id", "must be a non-empty agent id other than source_agent_id")
        if not isinstance(strategy, str) or strategy not in STRATEGIES:
            raise InvalidArgument("strategy", f"must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        if not isinstance(mode, str) or mode not in MODES:
            raise InvalidArgument("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
        with cycle_collection_paused():
            return self._merge(source, target, strategy, mode, dry, progress)

    def _merge(self, source: str, target: str, strategy: str, mode: str, dry: bool,
               progress: Progress | None) -> dict[str, Any]:
        with self.db.snapshot() as s:
            rows = {t: list(s.dump.rows(t, source, with_embedding=t != "profiles"))
                    for t in ("memories", "episodes", "profiles")}
            state = s.meta.vector_state()
            graph = s.associations.graph(source)
        out: dict[str, Any] = {"ok": True, "dry_run": dry, "source_agent_id": source, "target_agent_id": target,
                               "strategy": strategy, "mode": mode, "merged_memories": 0, "skipped_memories": 0,
                               "merged_episodes": 0, "skipped_episodes": 0, "profile_copied": False,
                               "skipped_profile": False}
        ctx = _Merge(target, strategy, state, out, dry, mode == "move", graph)
        if graph:
            out["associations"] = graph.counts()
        items = [(table, row) for table in ("memories", "episodes", "profiles") for row in rows[table]]
        if not items:  # most often a misspelt agent id: say so rather than answer a silent 0
            out["note"] = f"agent {source!r} has no memories, episodes or profile: nothing to merge"
        if dry:
            with self.db.read() as s:
                for table, row in items:
                    self._merge_one(s, 0, table, row, ctx)
            return out
        run = BulkRun(self.db, "merge", {"source": source, "target": target, "mode": mode}, self.placement.forget)
        try:
            run.write(items, lambda s, op, item: self._merge_one(s, op, item[0], item[1], ctx),
                      (lambda done: progress("merge", done, len(items))) if progress else None)
            run.commit("deleting" if mode == "move" else "done", last=lambda s: self._carry(s, ctx))
        except Exception as err:  # noqa: BLE001 — undone, and reported in the answer
            undone = run.rolled_back()
            return {**out, "ok": False, "merged_memories": 0, "merged_episodes": 0, "profile_copied": False,
                    "error": f"merge aborted and {undone}: {type(err).__name__}: {err}"}
        self.queue.notify()
        if mode == "move":
            self._after_move(source, out, ctx.graph_whole)
        return out

    def _merge_one(self, s: Session, op: int, table: str, row: dict[str, Any], ctx: _Merge) -> None:
        """Merge one source row (module doc); counts go to `ctx.out`."""
        if table == "profiles":
            self._merge_profile(s, op, row, ctx)
            return
        if not ctx.dry:  # the row as it is now: a write since the snapshot is carried, not lost
            current = s.dump.row(table, row["id"], with_embedding=True)
            if current is None or current["agent_id"] != row["agent_id"]:
                return  # deleted (or moved) meanwhile: nothing to copy
            row = current
        text = row["content" if table == "memories" else "summary"]
        key = (ctx.target, row["project_id"], row["channel"], text)
        taken = not text.strip() or (table == "memories" and bool(row["msg_id"]) and
                                     s.bulk.msg_id_taken(ctx.target, row["project_id"], row["msg_id"]))
        taken = taken or (s.bulk.episode_taken(*key) if table == "episodes" else ctx.dry and s.bulk.content_taken(*key))
        copy_id: int | None = None
        if not taken and not ctx.dry:
            blob = _vector(ctx.state, table, row)
            copy = {**row, "agent_id": ctx.target}
            ref = s.bulk.insert_memory(copy, blob) if table == "memories" else s.bulk.insert_episode(copy, blob)
            if ref is None:  # the content unique index: a duplicate
                taken = True
            else:
                copy_id = ref.id
                s.journal.note(op, "insert", table, ref.id)
                if ctx.move:
                    s.journal.note(op, "delete", table, row["id"])
                self.placement.place(s, table, ref, from_blob(blob))
        ctx.out[("skipped_" if taken else "merged_") + table] += 1
        if not ctx.dry and (copy_id := copy_id or _equal(s, table, row, ctx.target)) is not None:
            ctx.refs[f"{_KIND[table]}:{row['id']}"] = f"{_KIND[table]}:{copy_id}"

    @staticmethod
    def _carry(s: Session, ctx: _Merge) -> None:
        """The source's declarations, under the target, pointed at the copies (module doc)."""
        if ctx.graph:
            carried = carry(s.associations, ctx.graph, ctx.refs, utc_now_iso(), ctx.target)
            ctx.out["associations"] = carried.counts()
            ctx.graph_whole = not carried.notes()
            if carried.notes():
                ctx.out["associations_note"] = " ".join(carried.notes())

    def _merge_profile(self, s: Session, op: int, row: dict[str, Any], ctx: _Merge) -> None:
        if not row["content"].strip():
            return
        prior = s.bulk.profile(ctx.target, row["user_id"])
        if prior is not None and ctx.strategy == "skip":
            ctx.out["skipped_profile"] = True
            return
        ctx.out["profile_copied"] = True
        if ctx.dry:
            return
        new_id = s.bulk.put_profile(ctx.target, row["user_id"], row["content"], utc_now_iso(), row["project_id"])
        s.journal.note(op, "profile", "profiles", new_id,
                       None if prior is None else {k: prior[k] for k in ("content", "updated_at", "project_id")})
        if ctx.move:
            s.journal.note(op, "delete", "profiles", row["id"])

    def _after_move(self, source: str, out: dict[str, Any], graph_whole: bool) -> None:
        """Report what is left at the source; tear its queue rows and calibration down only
        when nothing is left — and its declarations when they all arrived at the target too."""
        with self.db.write() as s:
            left = s.bulk.left(source)
            tasks = s.bulk.delete_pending_tasks(source) if not any(left.values()) else 0
        out["left_at_source"] = left
        out["source_deleted"] = {"ok": True, "agent_id": source, "deleted_memories": out["merged_memories"],
                                 "deleted_profiles": int(out["profile_copied"]),
                                 "deleted_episodes": out["merged_episodes"], "deleted_pending_tasks": tasks}
        if not any(left.values()):
            if graph_whole:
                with self.db.write() as s:
                    s.associations.forget(source)
            self.resident.remove_agent(source)
            try:
                self.calibration.forget_agent(source)
            except Exception as err:  # noqa: BLE001 — reported in the answer: the rows are moved already
                out["calibration_warning"] = f"calibration of {source!r} not cleared: {type(err).__name__}: {err}"

    # ------------------------------------------------------ channel-axis repair
    def migrate_channel_axis(self, agent_id: object = "", dry_run: object = True,
                             globalize_unrecoverable: object = False) -> Report:
        """Move memories filed under the bridge channel 'discord' to the concrete channel in
        their metadata.session_id ("<channel>:<…>"); with `globalize_unrecoverable` the others
        go to channel '' (visible from every channel). Dry run by default; forced while paused.
        Returns {agent_id, dry_run, recoverable_total, recoverable_by_channel, unrecoverable_total,
        invalid_metadata_total, invalid_metadata_ids, globalize_unrecoverable, migrated,
        globalized, samples, repairs_skipped?, repairs_skip_reason?}."""
        agent = validate.identifier("agent_id", agent_id)
        dry = validate.boolean("dry_run", dry_run)
        globalize = validate.boolean("globalize_unrecoverable", globalize_unrecoverable)
        out: dict[str, Any] = {}
        if not dry and self.pause.active():
            dry = True
            out = {"repairs_skipped": True, "repairs_skip_reason": "persistence is paused (pause_persistence)"}
        migrated = globalized = 0
        with (self.db.read() if dry else self.db.write()) as s:
            recoverable, rest = s.bulk.bridge_channel_rows(agent or None)
            if not dry:
                migrated = sum(s.bulk.set_channel(row_id, channel) for row_id, channel, _ in recoverable)
                globalized = sum(s.bulk.set_channel(row_id, "") for row_id, _ in rest) if globalize else 0
                s.after(self.resident.invalidate)
        by_channel: dict[str, int] = {}
        for _, channel, _ in recoverable:
            by_channel[channel] = by_channel.get(channel, 0) + 1
        invalid = [row_id for row_id, valid in rest if not valid]
        return {"agent_id": agent, "dry_run": dry, "recoverable_total": len(recoverable),
                "recoverable_by_channel": [{"channel": c, "count": n} for c, n in sorted(by_channel.items())],
                "unrecoverable_total": len(rest), "invalid_metadata_total": len(invalid),
                "invalid_metadata_ids": invalid[:_INVALID_IDS], "globalize_unrecoverable": globalize,
                "migrated": migrated, "globalized": globalized,
                "samples": [{"id": i, "recovered_channel": c, "session_id": sid}
                            for i, c, sid in recoverable[:_SAMPLES]],
                **out}
