"""export_memories: the memories, episodes and profiles of one agent (or all) as a
`cpersona-export/1.0` JSONL file (format: `portable/exporter.py`).

The header and every line come from ONE read snapshot (`Database.snapshot`), so the
header's counts always equal the lines even while the server keeps writing; the file is
written atomically. Over MCP the path is confined to the export folder
(`portable/paths.py`); the CLI passes `confine=False`. Export is a read: it runs while
persistence is paused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cpersona.errors import InvalidArgument
from cpersona.policy import validate
from cpersona.portable import exporter
from cpersona.portable.paths import confine, export_root
from cpersona.service.base import ServiceBase
from cpersona.storage.meta import VectorState

#: progress(what, done, total) — what is "export" | "import" | "merge" | "backup" | "restore".
Progress = Callable[[str, int, int], None]
_TABLES = ("memories", "episodes", "profiles")


def _active_vector(state: VectorState, row: dict[str, Any]) -> bytes | None:
    """The row's vector when it was made by the active model (else None: never exported
    under another model's name)."""
    blob = row.get("embedding")
    lo, hi = state.stale_range("memories")
    if blob is None or state.dim is None or len(blob) != 4 * state.dim or lo < row["id"] <= hi:
        return None
    return blob


class ExportService(ServiceBase):
    """export_memories; mixed into `Engine`."""

    def export_root(self) -> Path:
        """The folder MCP export / import paths are confined to."""
        return export_root(self.settings.export_dir, self.settings.db_file)

    def export_memories(self, agent_id: Any, output_path: Any, include_embeddings: Any = False, *,
                        confined: bool = True, progress: Progress | None = None) -> dict[str, Any]:
        """Write the agent's rows ('' = every agent) to `output_path` (JSONL, atomically).

        With `include_embeddings` each memory carries `embedding_b64` (its vector, when made
        by the active model) and the header names that model. Returns {ok: true, path,
        memories, episodes, profiles, embeddings}. Raises InvalidArgument (bad argument,
        path outside the export folder, path is a folder).
        """
        agent = validate.identifier("agent_id", agent_id)
        with_vectors = validate.boolean("include_embeddings", include_embeddings)
        path = confine("output_path", output_path, self.export_root() if confined else None)
        if path.is_dir():
            raise InvalidArgument("output_path", f"{path} is a folder; name the file to write")
        scope = agent or None
        written = {t: 0 for t in _TABLES} | {"embeddings": 0}
        with self.db.snapshot() as s, exporter.AtomicFile(path) as out:
            counts = {t: s.dump.count(t, scope) for t in _TABLES}
            state = s.meta.vector_state()
            model = (state.model, state.dim) if with_vectors and state.model and state.dim else None
            out.line(exporter.header(agent, counts, model))
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
        return {"ok": True, "path": str(path), **written}

    @staticmethod
    def _tick(progress: Progress | None, what: str, written: dict[str, int], total: int) -> None:
        done = written["memories"] + written["episodes"]
        if progress is not None and done % 500 == 0:
            progress(what, done, total)
