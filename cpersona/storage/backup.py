"""Consistent copies of a live database and putting one back (`cpersona backup` / `restore`).

A plain file copy of a WAL database can be torn: the `-wal` file holds committed pages the
main file does not have yet (https://www.sqlite.org/wal.html). So:

* `snapshot_copy` uses `VACUUM INTO` (https://www.sqlite.org/lang_vacuum.html#vacuuminto):
  one read transaction, so the copy is the committed state of one moment while the server
  keeps writing — and, unlike the page-by-page backup API, a busy writer can never make it
  start over. The copy is a self-contained file in rollback-journal mode.
* `restore_into` writes a verified copy INTO the live file with the online backup API
  (https://www.sqlite.org/backup.html): SQLite keeps one write transaction open on the
  destination for the whole copy, so a crash leaves the old database or the new one,
  never a mix, and other connections (a running server) simply see a new version.
* `inspect` opens a file read-only for the manifest and the checks before a restore:
  `PRAGMA integrity_check`, the schema version, the row counts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Pages copied per step of the backup API (progress is reported between steps).
RESTORE_PAGES_PER_STEP = 1024
_COUNTED = ("memories", "episodes", "profiles")


def _readonly(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def snapshot_copy(source: Path, target: Path) -> None:
    """Write a consistent copy of the (possibly live) database `source` to the new file
    `target`. Raises sqlite3.Error (e.g. the disk is full; the partial target is the
    caller's to remove)."""
    conn = sqlite3.connect(str(source), timeout=30)
    try:
        conn.execute("VACUUM INTO ?", (str(target),))
    finally:
        conn.close()


def used_bytes(path: Path) -> int:
    """Bytes of the database's pages in use (the size a VACUUM INTO copy grows to)."""
    conn = _readonly(path)
    try:
        pages = conn.execute("PRAGMA page_count").fetchone()[0] - conn.execute("PRAGMA freelist_count").fetchone()[0]
        return pages * conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()


def inspect(path: Path, max_errors: int = 10) -> dict[str, Any]:
    """{integrity: "ok" | first problems, schema_version, rows: {memories, episodes, profiles}}
    of a database file opened read-only. Raises sqlite3.Error when it is not a database."""
    conn = _readonly(path)
    try:
        problems = [r[0] for r in conn.execute(f"PRAGMA integrity_check({max_errors})")]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] \
            if "schema_version" in tables else None
        rows = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in _COUNTED if t in tables}
    finally:
        conn.close()
    return {"integrity": "ok" if problems == ["ok"] else "; ".join(problems), "schema_version": version, "rows": rows}


def restore_into(source: Path, target: Path, progress: Callable[[int, int], None] | None = None) -> None:
    """Replace the content of database `target` (live or not; created when absent) with the
    database `source`, in ONE write transaction on `target`. `progress(done_pages,
    total_pages)` between steps. Raises sqlite3.Error; `target` is then unchanged."""
    src = _readonly(source)
    dst = sqlite3.connect(str(target), timeout=30)
    try:
        def report(status: int, remaining: int, total: int) -> None:
            if progress is not None:
                progress(total - remaining, total)

        src.backup(dst, pages=RESTORE_PAGES_PER_STEP, progress=report)
    finally:
        dst.close()
        src.close()
