"""`cpersona backup DEST` and `cpersona restore SRC`: the database AND the files beside it.

backup — a folder (`portable/manifest.py`) with a consistent copy of the live database
(`VACUUM INTO`, never a file copy: `storage/backup.py`), the calibration sidecar, the
operating-context file and the ACL file when present, and a manifest (sizes, sha256, row
counts, schema version). Built under a temporary name and renamed when complete.

restore — checks the manifest (every size and sha256) and `PRAGMA integrity_check` of the
copy BEFORE anything is replaced; keeps what it replaces in
`<database folder>/cpersona-replaced-<UTC time>/` (a consistent copy of the current
database and the current side files); then writes the copy into the database file in one
write transaction (a running server sees the new version; restart it to reload the
calibration) and puts each side file back atomically.

Both work on files named by the settings only; they never open the database for serving.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cpersona.calibration.sidecar import path_for
from cpersona.config import Settings
from cpersona.errors import InvalidArgument
from cpersona.policy.projects import OperatingContext
from cpersona.portable import manifest
from cpersona.storage import backup as sqlite_backup
from cpersona.storage.originals import ORIGINAL_MAX_VERSION
from cpersona.util.files import fsync_dir

#: progress(what, done, total) — bytes for a backup, pages for a restore.
Progress = Callable[[str, int, int], None]
_POLL = 0.1


def side_files(settings: Settings) -> dict[str, Path]:
    """role → path of the files beside the database that a backup keeps (present or not)."""
    db_file = settings.db_file
    files: dict[str, Path] = {}
    if db_file is not None and (sidecar := path_for(db_file)) is not None:
        files["calibration"] = sidecar
    files["operating_context"] = OperatingContext.from_settings(settings).path
    if settings.acl_file:
        files["acl"] = Path(settings.acl_file).expanduser()
    return files


def _db_file(settings: Settings) -> Path:
    if settings.db_file is None:
        raise InvalidArgument("CPERSONA_DB_PATH", "an in-memory database (:memory:) has no file to back up or restore")
    return settings.db_file


def _copy_with_progress(source: Path, target: Path, progress: Progress | None) -> None:
    """VACUUM INTO in a worker thread; progress = bytes written so far of the pages in use."""
    total = sqlite_backup.used_bytes(source)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            sqlite_backup.snapshot_copy(source, target)
        except BaseException as err:  # noqa: BLE001 — re-raised in the caller's thread below
            failure.append(err)

    worker = threading.Thread(target=run, name="cpersona-backup", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(_POLL)
        if progress is not None:
            progress("backup", min(total, target.stat().st_size if target.exists() else 0), total)
    if failure:
        raise failure[0]


def backup(settings: Settings, dest: Any, progress: Progress | None = None) -> dict[str, Any]:
    """Back the database and its side files up into the new folder `dest` (module doc).

    Returns {ok: true, path, files: [{role, name, source, size, sha256}], rows, schema_version}.
    Raises InvalidArgument (dest exists, in-memory database, no database file) or OSError /
    sqlite3.Error (disk full…; nothing is left under `dest`).
    """
    db_file = _db_file(settings)
    if not db_file.exists():
        raise InvalidArgument("CPERSONA_DB_PATH", f"there is no database at {db_file}")
    target = Path(str(dest)).expanduser().resolve()
    if target.exists():
        raise InvalidArgument("dest", f"{target} already exists; name a new folder for the backup")
    target.parent.mkdir(parents=True, exist_ok=True)
    manifest.remove_stale_partials(target)
    partial = manifest.partial_folder(target)
    partial.mkdir()
    try:
        files = [{"role": "database", "name": manifest.NAMES["database"], "source": str(db_file)}]
        _copy_with_progress(db_file, partial / manifest.NAMES["database"], progress)
        for role, path in side_files(settings).items():
            if path.is_file():
                shutil.copyfile(path, partial / manifest.NAMES[role])
                files.append({"role": role, "name": manifest.NAMES[role], "source": str(path)})
        inspected = sqlite_backup.inspect(partial / manifest.NAMES["database"])
        if inspected["integrity"] != "ok":
            raise OSError(f"the copy fails the SQLite integrity check: {inspected['integrity']}")
        written = manifest.write(partial, files, inspected)
        manifest.publish(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return {"ok": True, "path": str(target), "files": written["files"], "rows": written["rows"],
            "schema_version": written["schema_version"]}


def _atomic_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.restore.{os.getpid()}")
    shutil.copyfile(source, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, target)
    fsync_dir(target.parent)


def restore(settings: Settings, src: Any, progress: Progress | None = None) -> dict[str, Any]:
    """Restore the backup folder `src` over the configured database and side files (module
    doc). Returns {ok: true, restored_from, kept, files: [roles restored], rows} or
    {ok: false, error} when the backup fails its checks (nothing was replaced)."""
    db_file = _db_file(settings)
    folder = Path(str(src)).expanduser().resolve()
    try:
        found = manifest.verify(folder)
    except manifest.ManifestError as err:
        return {"ok": False, "error": f"nothing was restored: {err}"}
    copy = folder / manifest.NAMES["database"]
    inspected = sqlite_backup.inspect(copy)
    if inspected["integrity"] != "ok":
        return {"ok": False, "error": f"nothing was restored: {copy} fails the SQLite integrity check: "
                                      f"{inspected['integrity']}"}
    if (inspected["schema_version"] or 0) > ORIGINAL_MAX_VERSION:
        return {"ok": False, "error": f"nothing was restored: {copy} has schema v{inspected['schema_version']}, "
                                      "newer than this cpersona can open"}
    kept = db_file.parent / f"cpersona-replaced-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    kept.mkdir(parents=True, exist_ok=False)
    if db_file.exists():
        sqlite_backup.snapshot_copy(db_file, kept / db_file.name)
    sides = side_files(settings)
    roles = [e["role"] for e in found["files"] if e["role"] != "database"]
    for role in roles:
        if role in sides and sides[role].is_file():
            shutil.copyfile(sides[role], kept / sides[role].name)
    sqlite_backup.restore_into(copy, db_file, (lambda d, t: progress("restore", d, t)) if progress else None)
    restored = ["database"]
    for role in roles:
        if role in sides:
            _atomic_copy(folder / manifest.NAMES[role], sides[role])
            restored.append(role)
    out = {"ok": True, "restored_from": str(folder), "kept": str(kept), "files": restored,
           "rows": inspected["rows"], "schema_version": inspected["schema_version"]}
    if skipped := [r for r in roles if r not in sides]:
        out["not_restored"] = {r: "set CPERSONA_ACL_FILE to restore the ACL file" for r in skipped}
    return out
