"""export_memories: the memories, episodes and profiles of one agent (or all) as a
`cpersona-export/1.0` JSONL file — `1.1` with the agent's declared associations (entities,
mentions, relations) after the records they name (format: `portable/exporter.py`).

The header and every line come from ONE read snapshot (`Database.snapshot`), so the
header's counts always equal the lines even while the server keeps writing; the file is
written atomically. Over MCP the path is confined to the export folder
(`portable/paths.py`); the CLI passes `confine=False`. Export is a read: it runs while
persistence is paused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cpersona.config import Settings
from cpersona.errors import InvalidArgument, file_unavailable
from cpersona.policy import validate
from cpersona.portable import exporter
from cpersona.portable.paths import confine, export_root, replaceable
from cpersona.service.backups import side_files
from cpersona.service.outcomes import Report
from cpersona.storage import Database
from cpersona.storage.meta import VectorState
from cpersona.updates.verdict import cache_path

#: progress(what, done, total) — what is "export" | "import" | "merge" | "backup" | "restore".
Progress = Callable[[str, int, int], None]
_TABLES = ("memories", "episodes", "profiles")
#: The files SQLite keeps beside a database: suffix → what they are.
_SQLITE_FILES = {"": "database file", "-wal": "write-ahead log", "-shm": "shared-memory index",
                 "-journal": "rollback journal"}


def _active_vector(state: VectorState, row: dict[str, Any]) -> bytes | None:
    """The row's vector when it was made by the active model (else None: never exported
    under another model's name)."""
    blob = row.get("embedding")
    lo, hi = state.stale_range("memories")
    if blob is None or state.dim is None or len(blob) != 4 * state.dim or lo < row["id"] <= hi:
        return None
    return blob


def export_folder(settings: Settings) -> Path:
    """The folder MCP export / import paths are confined to."""
    return export_root(settings.export_dir, settings.db_file)


def own_files(settings: Settings) -> dict[Path, str]:
    """Resolved path → description of every file this server owns (the database, its
    SQLite companions, the side files): never an export target nor an import source."""
    db = settings.db_file
    files: dict[Path, str] = {}
    if db is not None:
        files.update({Path(f"{db}{suffix}"): f"this server's {what}" for suffix, what in _SQLITE_FILES.items()})
        files[cache_path(db) or db] = "this server's update-check cache"
    files.update({path: f"this server's {role.replace('_', ' ')} file" for role, path in side_files(settings).items()})
    return {path.expanduser().resolve(): what for path, what in files.items()}


@dataclass(frozen=True, eq=False)
class ExportService:
    """export_memories over the database; paths as `settings` confine them."""

    settings: Settings
    db: Database

    def export_memories(self, agent_id: object, output_path: object, include_embeddings: object = False, *,
                        confined: bool = True, progress: Progress | None = None) -> Report:
        """Write the agent's rows ('' = every agent) to `output_path` (JSONL, atomically).

        With `include_embeddings` each memory carries `embedding_b64` (its vector, when made
        by the active model) and the header names that model. Returns {ok: true, path,
        memories, episodes, profiles, embeddings, associations?: {entities, mentions,
        relations}}. Raises InvalidArgument (bad argument,
        path outside the export folder, path is a folder); StorageUnavailable when the file
        cannot be written (disk_full, read_only, io_error: nothing written, an earlier file kept).
        """
        agent = validate.identifier("agent_id", agent_id)
        with_vectors = validate.boolean("include_embeddings", include_embeddings)
        path = confine("output_path", output_path, export_folder(self.settings) if confined else None,
                       own_files(self.settings), written=True)
        if path.is_dir():
            raise InvalidArgument("output_path", f"{path} is a folder; name the file to write")
        if confined:
            replaceable("output_path", path)
        try:
            written = self._export(agent, path, with_vectors, progress)
        except OSError as err:  # answered to the caller, who asked for the file
            raise file_unavailable(f"output_path: cannot write {path}; nothing was written and an earlier "
                                   "file of that name is unchanged", err) from err
        return {"ok": True, "path": str(path), **written}

    def _export(self, agent: str, path: Path, with_vectors: bool, progress: Progress | None) -> dict[str, Any]:
        """Write the export file atomically; the counts written. Raises OSError (disk)."""
        scope = agent or None
        written: dict[str, Any] = {t: 0 for t in _TABLES} | {"embeddings": 0}
        with self.db.snapshot() as s, exporter.AtomicFile(path) as out:
            counts = {t: s.dump.count(t, scope) for t in _TABLES}
            state = s.meta.vector_state()
            model = (state.model, state.dim) if with_vectors and state.model and state.dim else None
            graph = s.associations.graph(scope)
            out.line(exporter.header(agent, counts, model, graph.counts()))
            total = sum(counts.values())
            for row in s.dump.rows("memories", scope, with_embedding=model is not None):
                blob = _active_vector(state, row) if model else None
                out.line(exporter.memory(row, blob))
                written["memories"] += 1
                written["embeddings"] += blob is not None
                self._tick(progress, "export", written, total)
            for row in s.dump.rows("episodes", scope):
                out.line(exporter.episode(row))
                written["episodes"] += 1
                self._tick(progress, "export", written, total)
            for row in s.dump.rows("profiles", scope):
                out.line(exporter.profile(row))
                written["profiles"] += 1
            for line in (*map(exporter.entity, graph.entities.values()), *map(exporter.mention, graph.mentions),
                         *map(exporter.relation, graph.relations)):
                out.line(line)
        if graph:
            written["associations"] = graph.counts()
        return written

    @staticmethod
    def _tick(progress: Progress | None, what: str, written: dict[str, int], total: int) -> None:
        done = written["memories"] + written["episodes"]
        if progress is not None and done % 500 == 0:
            progress(what, done, total)
