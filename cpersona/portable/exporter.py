"""Writing a `cpersona-export/1.0` / `1.1` file: the line shapes, and the atomic file.

One JSON object per line, UTF-8 with non-ASCII kept: a header (`version`, `agent_id`,
`exported_at`, `memory_count`, `episode_count`, `has_profile`, `profile_count`, plus ours:
`exporter`, and with embeddings `embedding_model` / `embedding_dim`, which let an import
into a database of the same model keep the vectors), then memories, episodes and profiles,
each in id order. With declared associations the file is `cpersona-export/1.1`, as the
original CPersona 2.6 writes it: the header also counts them (`entity_count`, `mention_count`,
`relation_count`) and entity, mention and relation lines follow the records they name, keyed on
the ids the file gives those records. The original CPersona reads these files (unknown header
keys are ignored).

`AtomicFile` writes `.<name>.tmp.<pid>` beside the target, fsyncs it and renames it over
the target, then fsyncs the folder: a crash leaves the old file or the complete new one,
never half of one (a leftover temp file of a dead process is removed by the next export).
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from cpersona import __version__
from cpersona.storage.records import Entity, Mention, Relation
from cpersona.util.files import fsync_dir, pid_alive

VERSION = "cpersona-export/1.0"
#: The version of a file with declared associations.
GRAPH_VERSION = "cpersona-export/1.1"
_MEMORY = ("id", "agent_id", "msg_id", "content", "source", "timestamp", "metadata", "created_at", "project_id",
           "channel", "locked", "recall_count", "last_recalled_at")
_EPISODE = ("id", "agent_id", "summary", "keywords", "start_time", "end_time", "created_at", "resolved", "project_id",
            "channel")
_PROFILE = ("agent_id", "user_id", "content", "updated_at", "project_id")


def _object(text: Any) -> Any:
    """Stored JSON text as its value (text that is not JSON is exported as the string)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return text


def header(agent: str, counts: dict[str, int], model: tuple[str, int] | None,
           graph: dict[str, int] | None = None) -> dict[str, Any]:
    """The header line; `graph` = {entities, mentions, relations} to write (any: version 1.1)."""
    out: dict[str, Any] = {"_type": "header", "version": GRAPH_VERSION if graph and any(graph.values()) else VERSION,
                           "agent_id": agent,
                           "exported_at": datetime.now(UTC).isoformat(), "memory_count": counts["memories"],
                           "episode_count": counts["episodes"], "has_profile": counts["profiles"] > 0,
                           "profile_count": counts["profiles"], "exporter": f"cpersona {__version__}"}
    if out["version"] == GRAPH_VERSION and graph:
        out.update(entity_count=graph["entities"], mention_count=graph["mentions"], relation_count=graph["relations"])
    if model is not None:
        out["embedding_model"], out["embedding_dim"] = model
    return out


def memory(row: dict[str, Any], embedding: bytes | None) -> dict[str, Any]:
    out = {"_type": "memory", **{k: row[k] for k in _MEMORY}}
    out["source"], out["metadata"] = _object(row["source"]), _object(row["metadata"])
    if embedding is not None:
        out["embedding_b64"] = base64.b64encode(embedding).decode("ascii")
    return out


def episode(row: dict[str, Any]) -> dict[str, Any]:
    out = {"_type": "episode", **{k: row[k] for k in _EPISODE}}
    out["resolved"] = bool(row["resolved"])
    return out


def profile(row: dict[str, Any]) -> dict[str, Any]:
    return {"_type": "profile", **{k: row[k] for k in _PROFILE}}


def entity(e: Entity) -> dict[str, Any]:
    return {"_type": "entity", "id": e.id, "agent_id": e.agent_id, "project_id": e.project_id, "channel": e.channel,
            "name": e.name, "declared_by": e.declared_by, "created_at": e.created_at, "aliases": list(e.aliases)}


def mention(m: Mention) -> dict[str, Any]:
    return {"_type": "mention", **asdict(m)}


def relation(r: Relation) -> dict[str, Any]:
    return {"_type": "relation", **asdict(r)}


class AtomicFile:
    """`with AtomicFile(path) as f: f.line(obj)` — see the module doc."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
        self._file: IO[str] | None = None

    def __enter__(self) -> AtomicFile:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(self.path)
        self._file = open(self.tmp, "w", encoding="utf-8", newline="\n")
        return self

    def line(self, obj: dict[str, Any]) -> None:
        assert self._file is not None
        self._file.write(json.dumps(obj, ensure_ascii=False) + "\n")

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        assert self._file is not None
        try:
            if kind is None:
                self._file.flush()
                os.fsync(self._file.fileno())
            self._file.close()
            if kind is None:
                os.replace(self.tmp, self.path)
                fsync_dir(self.path.parent)
        finally:
            if self.tmp.exists():
                self.tmp.unlink()


def remove_stale_temps(path: Path) -> None:
    """Delete `.<name>.tmp.<pid>` files of `path` left by processes that no longer run."""
    for tmp in path.parent.glob(f".{path.name}.tmp.*"):
        pid = tmp.name.rsplit(".", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            tmp.unlink(missing_ok=True)
