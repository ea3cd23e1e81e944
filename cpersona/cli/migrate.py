"""`cpersona migrate`: copy a whole store between backends — a SQLite file into PostgreSQL
(`--to postgresql://…`) or back (`--from postgresql://… --to file.db`) — with a progress
bar, resumable, verified by row counts and checksums.

    cpersona migrate --to postgresql://user@host/db           the configured SQLite file → PostgreSQL
    cpersona migrate --from postgresql://user@host/db --to copy.db
    cpersona migrate --to … --verify-only                      compare both sides, copy nothing

Every table is copied in id order with its ids, in batches, each batch one transaction of
the target; a rerun resumes after the largest id the target holds (the target records which
source it is being filled from, and a non-empty target filled from anything else is
refused). The `cpersona_meta` entries follow — the recorded embedding model, so vectors stay
usable — and the calibration state moves with them: the SQLite sidecar file becomes the
database record on PostgreSQL and back. Finally both sides are read again: per table the row
count and a SHA-256 over every row (id order) must agree, or the command fails (exit 1) and
names the table. Stop the servers writing to the source first: a row changed after it was
copied shows up as a checksum mismatch, and a rerun copies only rows with new ids.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cpersona.calibration import sidecar
from cpersona.calibration.store import STATE_KEY
from cpersona.config import Settings
from cpersona.errors import ConfigError
from cpersona.storage import Database
from cpersona.storage.backend import is_postgres, open_url
from cpersona.storage.meta import CALIBRATION_KEY, POSTGRES_LAYOUT_KEY
from cpersona.storage.transfer import COLUMNS

#: cpersona_meta key recording which source a target is being filled from.
RECORD_KEY = "migrated_from"
#: Meta keys that describe the copy itself or the other backend's calibration form.
_NOT_COPIED = {RECORD_KEY, STATE_KEY, CALIBRATION_KEY, POSTGRES_LAYOUT_KEY}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("migrate", help="copy the store between SQLite and PostgreSQL (resumable, verified)",
                       description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--to", dest="target", default="",
                   help="target: postgresql://… URL or a SQLite file path (default: the configured database)")
    p.add_argument("--from", dest="source", default="",
                   help="source: postgresql://… URL or a SQLite file path (default: the configured database)")
    p.add_argument("--batch", type=int, default=1000, help="rows per transaction (1..100000, default 1000)")
    p.add_argument("--verify-only", action="store_true", help="compare counts and checksums, copy nothing")
    p.set_defaults(func=migrate_command)


def _configured(settings: Settings) -> str:
    return settings.db_url or settings.db_path


def _label(location: str) -> str:
    if is_postgres(location):
        from cpersona.storage.postgres.url import display_url

        return display_url(location)
    return str(Path(location).expanduser().resolve())


def _resolve(settings: Settings, args: argparse.Namespace) -> tuple[str, str]:
    source = args.source or _configured(settings)
    target = args.target or _configured(settings)
    if not (args.source or args.target):
        raise ConfigError("cpersona migrate: name the other side with --to postgresql://… or --from postgresql://…")
    if _label(source) == _label(target):
        raise ConfigError(f"cpersona migrate: source and target are the same database ({_label(source)})")
    if not is_postgres(source) and not Path(source).expanduser().exists():
        raise ConfigError(f"cpersona migrate: no SQLite file at {_label(source)}")
    if not 1 <= args.batch <= 100_000:
        raise ConfigError("cpersona migrate: --batch must be in 1..100000")
    return source, target


def migrate_command(settings: Settings, args: argparse.Namespace) -> int:
    """Copy (unless --verify-only), then verify; prints a table; 0 when verified."""
    from rich.console import Console

    source_url, target_url = _resolve(settings, args)
    out, err = Console(highlight=False), Console(stderr=True, highlight=False)  # progress on stderr
    source = open_url(source_url, settings.fts_enabled)
    try:
        target = open_url(target_url, settings.fts_enabled)
    except BaseException:
        source.close()
        raise
    try:
        if not args.verify_only:
            problem = _claim_target(target, _label(source_url))
            if problem:
                print(f"cpersona migrate: {problem}", file=sys.stderr)
                return 1
            _copy(source, target, args.batch, err)
            _move_calibration(source, source_url, target, target_url)
        report = verify(source, target)
        ok = all(r["match"] for r in report)
        if ok and not args.verify_only:
            with target.write() as s:
                s.meta.put(RECORD_KEY, {"source": _label(source_url), "state": "verified",
                                        "verified_at": datetime.now(UTC).isoformat()})
    finally:
        source.close()
        target.close()
    _print_report(out, report, _label(source_url), _label(target_url))
    return 0 if ok else 1


# ------------------------------------------------------------------ copying
def _claim_target(target: Database, source_label: str) -> str:
    """'' when the target is empty or was being filled from this source (recorded now)."""
    with target.read() as s:
        record = s.meta.get(RECORD_KEY)
        rows = sum(s.transfer.count(t) for t in COLUMNS)
    if rows and not (isinstance(record, dict) and record.get("source") == source_label):
        whence = f"from {record.get('source')}" if isinstance(record, dict) else "by a server"
        return (f"the target already holds {rows} rows, written {whence}; copy into an empty database "
                "(or rerun with the same source to resume)")
    with target.write() as s:
        s.meta.put(RECORD_KEY, {"source": source_label, "state": "copying",
                                "started_at": datetime.now(UTC).isoformat()})
    return ""


def _copy(source: Database, target: Database, batch: int, console: Any) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        for table in COLUMNS:
            with source.read() as s:
                total = s.transfer.count(table)
            with target.read() as t:
                after, done = t.transfer.max_id(table), t.transfer.count(table)
            task = bar.add_task(table, total=total, completed=min(done, total))
            while True:
                with source.read() as s:
                    rows = s.transfer.rows(table, after, batch)
                if not rows:
                    break
                with target.write() as t:
                    t.transfer.insert_rows(table, rows)
                after = rows[-1][0]
                bar.advance(task, len(rows))
    with source.read() as s:
        items = [(k, v) for k, v in s.transfer.meta_items() if k not in _NOT_COPIED]
    with target.write() as t:
        t.transfer.put_meta_items(items)
        t.transfer.finish()


def _move_calibration(source: Database, source_url: str, target: Database, target_url: str) -> None:
    """The calibration state follows the rows: sidecar file ↔ database record."""
    if is_postgres(source_url):
        with source.read() as s:
            state = s.meta.get(STATE_KEY)
    else:
        loaded = sidecar.load(sidecar.path_for(Path(source_url).expanduser().resolve()))
        state = loaded.data if loaded.status == "ok" else None
    if not isinstance(state, dict):
        return
    if is_postgres(target_url):
        with target.write() as t:
            t.meta.put(STATE_KEY, state)
        return
    path = sidecar.path_for(Path(target_url).expanduser().resolve())
    if path is not None and not sidecar.write_atomic(path, state):
        with target.write() as t:
            sidecar.record_written(t, path, str(state.get("calibrated_at") or ""))


# --------------------------------------------------------------- verifying
def _canonical(value: Any) -> Any:
    """One value as both backends agree on it: bytes as hex, numbers normalised, text as is."""
    if isinstance(value, bytes | memoryview):
        return {"b": bytes(value).hex()}
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def table_digest(db: Database, table: str, batch: int = 2000) -> tuple[int, str]:
    """(rows, SHA-256 hex of every row in id order) of one table."""
    digest, rows, after = hashlib.sha256(), 0, 0
    while True:
        with db.read() as s:
            chunk = s.transfer.rows(table, after, batch)
        if not chunk:
            return rows, digest.hexdigest()
        for row in chunk:
            digest.update(json.dumps([_canonical(v) for v in row], ensure_ascii=False).encode())
            digest.update(b"\n")
        rows += len(chunk)
        after = chunk[-1][0]


def _meta_digest(db: Database) -> tuple[int, str]:
    with db.read() as s:
        items = [(k, v) for k, v in s.transfer.meta_items() if k not in _NOT_COPIED]
    return len(items), hashlib.sha256(json.dumps(items, ensure_ascii=False).encode()).hexdigest()


def verify(source: Database, target: Database) -> list[dict[str, Any]]:
    """Per table: rows and checksum on both sides and whether they match."""
    report = []
    for table in (*COLUMNS, "cpersona_meta"):
        digest = _meta_digest if table == "cpersona_meta" else (lambda db, t=table: table_digest(db, t))
        (n_src, h_src), (n_dst, h_dst) = digest(source), digest(target)
        report.append({"table": table, "source_rows": n_src, "target_rows": n_dst, "source_sha256": h_src,
                       "target_sha256": h_dst, "match": (n_src, h_src) == (n_dst, h_dst)})
    return report


def _print_report(console: Any, report: list[dict[str, Any]], source: str, target: str) -> None:
    from rich.table import Table

    table = Table(title=f"{source} → {target}")
    for col in ("table", "source rows", "target rows", "checksum (sha256)", "verified"):
        table.add_column(col)
    for r in report:
        same = r["source_sha256"] == r["target_sha256"]
        checksum = r["source_sha256"][:16] if same else f"{r['source_sha256'][:16]} ≠ {r['target_sha256'][:16]}"
        table.add_row(r["table"], str(r["source_rows"]), str(r["target_rows"]), checksum,
                      "yes" if r["match"] else "NO")
    console.print(table)
    if not all(r["match"] for r in report):
        bad = ", ".join(r["table"] for r in report if not r["match"])
        print(f"cpersona migrate: verification failed for {bad} (was the source written to during the copy? "
              "rerun to copy new rows; changed rows need a fresh, empty target)", file=sys.stderr)
