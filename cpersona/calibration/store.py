"""Where the calibration state is kept: the sidecar file beside a SQLite database, or — when
several nodes share a PostgreSQL database — a record in that database, so every node sees
the same thresholds and a node's local disk holds nothing that a restore could lose.

Both stores speak the sidecar's payload format (calibration/sidecar.py: `validate`, the
fingerprint fields) and answer `load()` with a `sidecar.Loaded` (ok / absent / corrupt).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from cpersona.calibration import sidecar
from cpersona.config import Settings
from cpersona.storage import Database

log = logging.getLogger(__name__)

#: cpersona_meta key of the calibration state in a shared database.
STATE_KEY = "calibration_state"
#: cpersona_meta key of the state replaced by a staleness-triggered recalibration.
BACKUP_KEY = "calibration_state_previous"


class CalibrationStore(Protocol):
    """What `CalibrationState` needs of its persistence."""

    #: How the state is named in messages ("calibration file x.db.calibration.json").
    label: str
    #: The sidecar file (None when the state lives in the database).
    path: Path | None

    def load(self) -> sidecar.Loaded:
        """The stored payload, validated; never raises."""

    def save(self, build: Callable[[sidecar.Loaded], dict[str, Any]]) -> str:
        """Store `build(the state stored now)`; '' on success, else the error text."""

    def backup(self, old_version: str | None) -> None:
        """Keep the current state before a staleness-triggered recalibration replaces it."""

    def lost(self) -> dict[str, Any] | None:
        """The record of an earlier write when the state itself is missing, else None."""

    def stamp(self) -> Hashable | None:
        """A value that changes whenever the stored state is replaced (None: no state, or unreadable)."""


class SidecarStore:
    """The JSON file `<db>.calibration.json` beside a SQLite database."""

    def __init__(self, path: Path, db: Database) -> None:
        self.path: Path | None = path
        self.file = path
        self.db = db
        self.label = f"calibration file {path.name}"

    def load(self) -> sidecar.Loaded:
        return sidecar.load(self.file)

    def save(self, build: Callable[[sidecar.Loaded], dict[str, Any]]) -> str:
        """Read, merge and replace the file inside one write transaction of the database: its
        write lock is held by one connection of any process at a time, so two servers on the
        same file calibrating different agents at once both keep their entries (a bare
        read-merge-rename let the second rename drop the first's entry). The transaction also
        records that the file exists. A read-only database writes the file without that lock."""
        if self.db.read_only:
            return sidecar.write_atomic(self.file, build(self.load()))
        written = ""
        try:
            with self.db.write() as s:
                payload = build(self.load())
                error = sidecar.write_atomic(self.file, payload)
                if error:
                    return error
                written = payload["calibrated_at"]
                sidecar.record_written(s, self.file, written)
        except Exception as err:  # noqa: BLE001 — reported to the caller, or logged once the file is written
            if not written:
                return f"{type(err).__name__}: {err}"
            log.warning("could not record the calibration file in the database: %s", err)
        return ""

    def backup(self, old_version: str | None) -> None:
        sidecar.backup(self.file, old_version)

    def stamp(self) -> Hashable | None:
        """(mtime ns, size, inode) of the file: every save replaces it (write, then rename)."""
        try:
            st = os.stat(self.file)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def lost(self) -> dict[str, Any] | None:
        if self.file.exists():
            return None
        with self.db.read() as s:
            return sidecar.recorded(s)


class DatabaseStore:
    """The state as one JSON record in the shared database (`cpersona_meta['calibration_state']`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.path: Path | None = None
        self.label = "calibration record in the database"

    def load(self) -> sidecar.Loaded:
        try:
            with self.db.read() as s:
                return _loaded(s.meta.get(STATE_KEY))
        except Exception as err:  # noqa: BLE001 — reported as a corrupt state, never raised into startup
            return sidecar.Loaded("corrupt", error=f"{type(err).__name__}: {err}")

    def save(self, build: Callable[[sidecar.Loaded], dict[str, Any]]) -> str:
        """Read, merge and write in ONE transaction holding the record's lock, so two nodes
        calibrating different agents at once both keep their entries."""
        try:
            with self.db.write() as s:
                s.meta.lock(STATE_KEY)
                payload = build(_loaded(s.meta.get(STATE_KEY)))
                s.meta.put(STATE_KEY, json.loads(json.dumps(payload, allow_nan=False)))
        except Exception as err:  # noqa: BLE001 — the caller reports it (sidecar_persisted: false)
            return f"{type(err).__name__}: {err}"
        return ""

    def backup(self, old_version: str | None) -> None:
        current = self.load()
        if current.status != "ok":
            return
        with self.db.write() as s:
            s.meta.put(BACKUP_KEY, {"scoring_version": old_version, "saved_at": datetime.now(UTC).isoformat(),
                                    "state": current.data})

    def lost(self) -> dict[str, Any] | None:
        return None  # the state lives with the rows: restored with them, never separately lost

    def stamp(self) -> Hashable | None:
        """The record's `calibrated_at` (every save sets it)."""
        loaded = self.load()
        return loaded.data.get("calibrated_at") if loaded.status == "ok" else None


def _loaded(data: Any) -> sidecar.Loaded:
    if data is None:
        return sidecar.Loaded("absent")
    problem = sidecar.validate(data)
    return sidecar.Loaded("corrupt", error=problem) if problem else sidecar.Loaded("ok", data)


def store_for(settings: Settings, db: Database) -> CalibrationStore | None:
    """The database record when nodes share the database, the sidecar file beside a SQLite
    file, None for an in-memory database (nothing persisted)."""
    if getattr(db, "shared_by_nodes", False):
        return DatabaseStore(db)
    path = sidecar.path_for(settings.db_file)
    return SidecarStore(path, db) if path is not None else None
