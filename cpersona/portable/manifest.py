"""The backup folder: its manifest, and publishing it whole.

A backup is a folder holding the database copy and the files beside it that a move would
forget — the calibration sidecar, the operating-context file, the ACL file — plus
`manifest.json`:

    {"format": "cpersona-backup/1", "created_at", "cpersona", "schema_version",
     "rows": {"memories", "episodes", "profiles"},
     "files": [{"role", "name", "source", "size", "sha256"}, ...]}

`role` is database | calibration | operating_context | acl; `source` the path the file was
copied from. The folder is built as `.<name>.partial.<pid>` and renamed to its name only
when complete (a crash leaves no folder that looks like a backup). `verify` recomputes every
size and sha256 before a restore touches anything.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cpersona import __version__
from cpersona.util.files import fsync_dir, pid_alive

FORMAT = "cpersona-backup/1"
MANIFEST = "manifest.json"
#: role → file name inside the backup folder.
NAMES = {"database": "memory.db", "calibration": "calibration.json", "operating_context": "operating-context.toml",
         "acl": "acl.json"}
_BLOCK = 1 << 20


class ManifestError(ValueError):
    """The backup folder is incomplete or damaged; `str(err)` says which file and how."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def partial_folder(dest: Path) -> Path:
    """Where a backup is built before it is published under `dest`."""
    return dest.with_name(f".{dest.name}.partial.{os.getpid()}")


def remove_stale_partials(dest: Path) -> None:
    """Delete partial folders of `dest` left by processes that no longer run."""
    for folder in dest.parent.glob(f".{dest.name}.partial.*"):
        pid = folder.name.rsplit(".", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            for child in folder.iterdir():
                child.unlink()
            folder.rmdir()


def write(folder: Path, files: list[dict[str, Any]], inspected: dict[str, Any]) -> dict[str, Any]:
    """Hash the copied files, write the manifest, fsync everything in `folder`."""
    for entry in files:
        path = folder / entry["name"]
        entry["size"], entry["sha256"] = path.stat().st_size, sha256(path)
    manifest = {"format": FORMAT, "created_at": datetime.now(UTC).isoformat(), "cpersona": __version__,
                "schema_version": inspected["schema_version"], "rows": inspected["rows"], "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for child in folder.iterdir():
        with open(child, "rb") as f:
            os.fsync(f.fileno())
    fsync_dir(folder)
    return manifest


def publish(partial: Path, dest: Path) -> None:
    """Rename the complete folder to `dest` (which must not exist) and make it durable."""
    os.rename(partial, dest)
    fsync_dir(dest.parent)


def verify(folder: Path) -> dict[str, Any]:
    """The manifest of a backup folder after checking every file's size and sha256.

    Raises:
        ManifestError: no or unreadable manifest, unknown format, a file missing or changed.
    """
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"{folder} has no {MANIFEST}: not a cpersona backup folder") from None
    except (OSError, ValueError, RecursionError) as err:
        raise ManifestError(f"{folder / MANIFEST} is unreadable ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT \
            or not isinstance(manifest.get("files"), list):
        raise ManifestError(f"{folder / MANIFEST} is not a {FORMAT} manifest")
    roles = set()
    for entry in manifest["files"]:
        if not isinstance(entry, dict) or entry.get("role") not in NAMES or entry.get("name") != NAMES[entry["role"]]:
            raise ManifestError(f"{folder / MANIFEST} lists an unknown file entry {entry!r}")
        path = folder / entry["name"]
        if not path.is_file():
            raise ManifestError(f"{path} is missing")
        if path.stat().st_size != entry.get("size") or sha256(path) != entry.get("sha256"):
            raise ManifestError(f"{path} does not match the manifest (size or sha256 differ): the backup is damaged")
        roles.add(entry["role"])
    if "database" not in roles:
        raise ManifestError(f"{folder / MANIFEST} lists no database file")
    return manifest
