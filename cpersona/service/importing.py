"""import_memories: bring memories, episodes and profiles in from a file — a cpersona export
(ours or the original's 1.0 / 1.1), another memory server's file (`portable/formats.py`),
or a whole database file of any CPersona version (`storage/originals.py`).

1. The whole file is read and checked first (size cap, UTF-8, JSON, field types, header
   counts, the write-path rules): a defect anywhere is answered before a row is written.
2. Dedup is exact per bucket — same (agent, project, message id), same (agent, project,
   channel, content), same episode summary — against the database AND earlier lines of
   the file, so importing the same file twice adds nothing.
3. The rows are written as one journaled bulk operation (`service/bulkwrite.py`): short
   transactions, all or nothing, a crash undone on the next start.
4. Vectors: an export's `embedding_b64` is kept only when the file names the same model
   and dimension as this database records — or, in a database that records no model yet
   (a restore into a new file), as the model this process embeds with, which the import
   then records (`embedding.identity`: a first model may be recorded by any process). Every
   other row is queued for the task queue, which embeds it in the background — two
   models' vectors are never mixed — and the answer says how many vectors were dropped,
   why, and what gives the rows their vectors (`vector_note`).
A profile overwrites the existing one of the same (agent, user_id) with the file's text and
time (the original's rule). The file's declared associations (an export 1.1, a database file of
the 2.6 line) are written with the commit point, pointed at the ids the records got here
(service/carrying.py). `dry_run` makes every decision and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cpersona.config import Settings
from cpersona.embedding.base import NORM_TOLERANCE
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.errors import StorageError
from cpersona.jobs.task_queue import TaskQueue
from cpersona.policy import validate
from cpersona.policy.pause import Pause
from cpersona.portable import formats, plan, reader
from cpersona.portable.paths import confine
from cpersona.service.bulkwrite import BulkRun
from cpersona.service.carrying import carry
from cpersona.service.exporting import Progress, export_folder, own_files
from cpersona.service.outcomes import Report
from cpersona.service.paused import skipped_body
from cpersona.service.placement import Placement
from cpersona.storage import Database, Session
from cpersona.storage.codec import from_blob
from cpersona.storage.originals import SourceFile, is_sqlite
from cpersona.storage.records import Graph
from cpersona.util.threads import cycle_collection_paused
from cpersona.util.time import utc_now_iso

_TEXT_FIELDS = {"memory": ("agent_id", "msg_id", "content", "source", "timestamp", "metadata", "project_id", "channel"),
                "episode": ("agent_id", "summary", "keywords", "project_id", "channel"),
                "profile": ("agent_id", "user_id", "content", "project_id")}
_KIND = {"memories": "memory", "episodes": "episode", "profiles": "profile"}


@dataclass
class Tally:
    """What an import did (or would do)."""

    memories: int = 0
    skipped_memories: int = 0
    episodes: int = 0
    skipped_episodes: int = 0
    profiles: int = 0
    kept_vectors: int = 0
    file_vectors: int = 0  # rows of the file that carried a vector
    without_vectors: int = 0  # imported memories and episodes left without a vector
    unsound: int = 0  # vectors of the right model dropped: wrong length, not finite, or not unit length
    seen: set = field(default_factory=set)  # dedup keys of earlier rows (dry run)
    refs: dict[str, str] = field(default_factory=dict)  # the file's record ref → the ref of its row here
    associations: dict[str, int] | None = None  # declarations carried (or, dry run, in the file)

    def mapped(self, kind: str, row: dict[str, Any], row_id: int | None) -> None:
        """The file's record `row` now lives in row `row_id` (written, or the equal one found)."""
        if row.get("file_id") is not None and row_id is not None:
            self.refs[f"{kind}:{row['file_id']}"] = f"{kind}:{row_id}"

    def body(self, dry_run: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": True, "dry_run": dry_run, "imported_memories": self.memories,
                               "skipped_memories": self.skipped_memories, "imported_episodes": self.episodes,
                               "skipped_episodes": self.skipped_episodes, "profile_updated": self.profiles > 0,
                               "profiles_updated": self.profiles, "embeddings_kept": self.kept_vectors}
        if self.file_vectors:
            out["embeddings_dropped"] = self.file_vectors - self.kept_vectors
        if self.without_vectors:
            out["without_vectors"] = self.without_vectors
        if self.associations:
            out["associations"] = self.associations
        return out


def _failure(error: str, dry_run: bool, notes: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"ok": False, "error": error, "dry_run": dry_run, "imported_memories": 0,
                           "skipped_memories": 0, "imported_episodes": 0, "skipped_episodes": 0,
                           "profile_updated": False}
    if notes:
        out["errors"] = notes
    return out


def _db_items(source: SourceFile, target: str) -> list[formats.Item]:
    """Every row of another database file as import items (text columns as text)."""
    items = []
    for table, kind in _KIND.items():
        for row in source.dump.rows(table, None, with_embedding=table == "memories"):
            for key in _TEXT_FIELDS[kind]:
                value = row.get(key)
                row[key] = "" if value is None else value if isinstance(value, str) else str(value)
            if target:
                row["agent_id"] = target
            row.setdefault("embedding", None)
            row["file_id"] = int(row.pop("id") or 0)
            items.append(formats.Item(kind, row["file_id"], row))
    return items


@dataclass(frozen=True, eq=False)
class ImportService:
    """import_memories over the engine's collaborators (`placement`: where an imported row's
    vector goes)."""

    settings: Settings
    db: Database
    gateway: EmbeddingGateway
    queue: TaskQueue
    pause: Pause
    placement: Placement

    def import_memories(self, input_path: object, target_agent_id: object = "", dry_run: object = False, *,
                        confined: bool = True, progress: Progress | None = None) -> Report:
        """Import a file (module doc). Returns {ok: true, dry_run, format, imported_memories,
        skipped_memories, imported_episodes, skipped_episodes, profile_updated,
        profiles_updated, embeddings_kept, errors?: [notes]}; a file with a defect or a write
        that failed answers {ok: false, error, …} and changes nothing. Raises
        InvalidArgument for a bad argument or a path outside the export folder.
        """
        dry = validate.boolean("dry_run", dry_run)
        if not dry and (paused := skipped_body(self.pause, "import_memories")) is not None:
            return paused
        target = validate.identifier("target_agent_id", target_agent_id)
        path = confine("input_path", input_path, export_folder(self.settings) if confined else None,
                       own_files(self.settings))
        if not path.exists():
            return _failure(f"input_path: {path} does not exist", dry)
        with cycle_collection_paused():
            return self._import(path, target, dry, progress)

    def _import(self, path: Path, target: str, dry: bool, progress: Progress | None) -> dict[str, Any]:
        try:
            fmt, items, notes, model, graph = self._read(path, target)
            todo = plan.prepare(items, plan.Caps(self.settings.max_content_length, self.settings.max_profile_length,
                                                 self.settings.max_metadata_length))
        except (reader.FileDefect, StorageError) as err:
            return _failure(f"nothing was imported: {err}", dry)
        except OSError as err:
            return _failure(f"input_path: cannot read {path}: {err}", dry)
        notes += todo.notes
        tally = Tally(skipped_memories=todo.skipped_memories, skipped_episodes=todo.skipped_episodes)
        if dry:
            self._simulate(todo, tally)
            tally.associations = graph.counts() if graph else None
        else:
            keep, dropped_why = self._vector_identity(model)
            error = self._write(path, todo, tally, keep, progress, (graph, target, notes))
            if error:
                return _failure(error, dry, notes)
        out = {**tally.body(dry), "format": fmt}
        if not dry and (note := self._vector_note(tally, dropped_why)):
            out["vector_note"] = note
        if notes:
            out["errors"] = notes
        return out

    def _read(self, path: Path, target: str) -> tuple[str, list[formats.Item], list[str], tuple | None, Graph]:
        """(format, items, notes, (model, dim) of the file's vectors or None, declared associations)."""
        if is_sqlite(path):
            source = SourceFile(path)
            try:
                info = source.describe()
                return (f"database v{info['schema_version']} ({info['written_by']})", _db_items(source, target), [],
                        source.vector_model(), source.graph())
            finally:
                source.close()
        parsed = formats.parse(reader.read_lines(path, self.settings.max_import_bytes), path.suffix, target)
        head = parsed.header or {}
        dim = head.get("embedding_dim")
        dim = int(dim) if isinstance(dim, str) and dim.strip().isdigit() else dim
        model = (head.get("embedding_model"), dim) if head.get("embedding_model") else None
        return parsed.format, parsed.items, parsed.notes, model, parsed.graph

    # ---------------------------------------------------------------- vectors
    def _vector_identity(self, model: tuple | None) -> tuple[tuple | None, str]:
        """((model, dim) whose vectors the import keeps, or None; why the file's vectors are
        dropped, '' when kept or when the file names no model). A database recording no
        model yet records the one this process embeds with when it is the file's (network
        I/O for an HTTP backend's identity: no lock held)."""
        if not model or not model[0]:
            return None, ""
        named = f"{model[0]} ({model[1]}-d)"
        with self.db.read() as s:
            state = s.meta.vector_state()
        if state.model is None and self.gateway.embedder is not None:
            if self.gateway.dim is None:
                self.gateway.embed_texts(["cpersona import probe"])
            if (self.gateway.model_id, self.gateway.dim) == tuple(model):
                state = self.gateway.reconcile() or state
        if state.model is not None and (state.model, state.dim) == tuple(model) and not state.pending:
            return tuple(model), ""
        if state.model is not None and (state.model, state.dim) == tuple(model):
            return None, f"this database is being re-embedded with {named} (`cpersona reembed`, or the server after " \
                         "a model change); the imported rows are embedded by that run"
        if state.model is not None:
            return None, f"the file's vectors come from {named}; this database's vectors belong to " \
                         f"{state.model} ({state.dim}-d)"
        if self.gateway.embedder is None:
            return None, f"the file's vectors come from {named}; no embedding model is configured here " \
                         "(CPERSONA_EMBEDDING_MODE=none), so none is recorded for this database"
        return None, self.gateway.refusal or f"the file's vectors come from {named}; this server embeds with " \
                                             f"{self.gateway.model_id} ({self.gateway.dim}-d)"

    def _vector_note(self, tally: Tally, dropped_why: str) -> str:
        """What happened to the file's vectors and what gives the imported rows theirs."""
        parts = []
        if tally.file_vectors > tally.kept_vectors and dropped_why:
            parts.append(f"{tally.file_vectors - tally.kept_vectors} vectors dropped: {dropped_why}.")
        if tally.unsound:
            parts.append(f"{tally.unsound} vectors dropped: not of the model's dimension, not finite, or not of unit "
                         "length (a damaged file); their rows are embedded again.")
        if tally.without_vectors:
            parts.append(f"{tally.without_vectors} of the imported memories and episodes have no vector yet and "
                         f"are found by keyword only until {self._who_embeds()}.")
        return " ".join(parts)

    def _who_embeds(self) -> str:
        if self.gateway.embedder is None:
            return ("an embedding model is configured (CPERSONA_EMBEDDING_MODE); then the server embeds them at "
                    "start, or run `cpersona reembed`")
        if self.queue.running():
            return f"the task queue embeds them with {self.gateway.model_id} in the background"
        return (f"they are embedded with {self.gateway.model_id}: the server's task queue does it when the server "
                "runs, or run `cpersona reembed` now")

    # ------------------------------------------------------------- dry run
    def _simulate(self, todo: plan.Plan, tally: Tally) -> None:
        with self.db.read() as s:
            for item in todo.memories:
                r = item.row
                keys: list[tuple] = [("m", r["agent_id"], r["project_id"], r["msg_id"])] if r["msg_id"] else []
                keys.append(("c", r["agent_id"], r["project_id"], r["channel"], r["content"]))
                taken = (r["msg_id"] and s.bulk.msg_id_taken(r["agent_id"], r["project_id"], r["msg_id"])) or \
                    s.bulk.content_taken(r["agent_id"], r["project_id"], r["channel"], r["content"])
                self._count(tally, keys, bool(taken), "memories")
            for item in todo.episodes:
                r = item.row
                key = ("e", r["agent_id"], r["project_id"], r["channel"], r["summary"])
                self._count(tally, [key], s.bulk.episode_taken(*key[1:]), "episodes")
            for item in todo.profiles:
                prior = s.bulk.profile(item.row["agent_id"], item.row["user_id"])
                tally.profiles += prior is None or prior["content"] != item.row["content"]

    @staticmethod
    def _count(tally: Tally, keys: list[tuple], taken: bool, what: str) -> None:
        if taken or any(k in tally.seen for k in keys):
            setattr(tally, f"skipped_{what}", getattr(tally, f"skipped_{what}") + 1)
            return
        tally.seen.update(keys)
        setattr(tally, what, getattr(tally, what) + 1)

    # ------------------------------------------------------------------ write
    def _write(self, path: Path, todo: plan.Plan, tally: Tally, keep: tuple | None, progress: Progress | None,
               declared: tuple[Graph, str, list[str]]) -> str:
        """Write the plan as one bulk operation, keeping the vectors of model `keep`
        ((model, dim) or None), and with its commit point the declarations of `declared`
        (graph, the agent they go to ('' = their own), the notes to add to); '' on success,
        else the error (undone)."""
        items = [*todo.memories, *todo.episodes, *todo.profiles]
        run = BulkRun(self.db, "import", {"file": str(path), "rows": len(items)}, self.placement.forget)
        writers = {"memory": self._put_memory, "episode": self._put_episode, "profile": self._put_profile}
        try:
            run.write(items, lambda s, op, item: writers[item.kind](s, op, item, keep, tally),
                      (lambda done: progress("import", done, len(items))) if progress else None)
            run.commit(last=lambda s: self._carry(s, tally, *declared))
        except Exception as err:  # noqa: BLE001 — undone, and reported in the answer
            return f"import aborted and {run.rolled_back()}: {type(err).__name__}: {err}"
        self.queue.notify()
        return ""

    @staticmethod
    def _carry(s: Session, tally: Tally, graph: Graph, target: str, notes: list[str]) -> None:
        if graph:
            carried = carry(s.associations, graph, tally.refs, utc_now_iso(), target)
            tally.associations = carried.counts()
            notes += carried.notes()

    def _put_memory(self, s: Session, op: int, item: formats.Item, keep: tuple | None, tally: Tally) -> None:
        r = item.row
        if r["msg_id"] and (equal := s.bulk.memory_with_msg_id(r["agent_id"], r["project_id"], r["msg_id"])):
            tally.skipped_memories += 1
            tally.mapped("mem", r, equal)
            return
        blob = r["embedding"] if keep and r["embedding"] and _sound(r["embedding"], keep[1]) else None
        tally.unsound += bool(keep and r["embedding"] and blob is None)
        ref = s.bulk.insert_memory(r, blob)
        if ref is None:
            tally.skipped_memories += 1
            tally.mapped("mem", r, s.bulk.memory_with_content(r["agent_id"], r["project_id"], r["channel"],
                                                              r["content"]))
            return
        tally.mapped("mem", r, ref.id)
        s.journal.note(op, "insert", "memories", ref.id)
        self.placement.place(s, "memories", ref, from_blob(blob))
        tally.memories += 1
        tally.kept_vectors += blob is not None
        tally.file_vectors += bool(r["embedding"])
        tally.without_vectors += blob is None

    def _put_episode(self, s: Session, op: int, item: formats.Item, keep: tuple | None, tally: Tally) -> None:
        r = item.row
        if equal := s.bulk.episode_with_summary(r["agent_id"], r["project_id"], r["channel"], r["summary"]):
            tally.skipped_episodes += 1
            tally.mapped("ep", r, equal)
            return
        ref = s.bulk.insert_episode(r, None)
        tally.mapped("ep", r, ref.id)
        s.journal.note(op, "insert", "episodes", ref.id)
        self.placement.place(s, "episodes", ref, None)
        tally.episodes += 1
        tally.without_vectors += 1

    def _put_profile(self, s: Session, op: int, item: formats.Item, keep: tuple | None, tally: Tally) -> None:
        r = item.row
        prior = s.bulk.profile(r["agent_id"], r["user_id"])
        if prior is not None and prior["content"] == r["content"]:
            return
        row_id = s.bulk.put_profile(r["agent_id"], r["user_id"], r["content"], r["updated_at"], r["project_id"])
        s.journal.note(op, "profile", "profiles", row_id,
                       None if prior is None else {k: prior[k] for k in ("content", "updated_at", "project_id")})
        tally.profiles += 1


def _sound(blob: bytes, dim: int) -> bool:
    """Whether an export's vector can be kept: `dim` float32 values, all finite, of unit
    length within the tolerance every embedding answer is held to (embedding/base.py) — a
    NaN kept here made every recall of its agent score NaN, which is not JSON."""
    if len(blob) != 4 * dim:
        return False
    vec = np.frombuffer(blob, dtype=np.float32)
    if not np.all(np.isfinite(vec)):
        return False
    return abs(float(np.linalg.norm(vec)) - 1.0) <= NORM_TOLERANCE
