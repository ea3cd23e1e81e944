"""`cpersona backup DEST` and `cpersona restore SRC`: the database (a consistent copy, safe
while the server runs) with its calibration, operating-context and ACL files, checked by a
manifest (service/backups.py)."""

from __future__ import annotations

import argparse

from cpersona.cli.progress import run_on_files
from cpersona.config import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("backup", help="back the database and its side files up into a new folder",
                       description="Copy the database consistently (VACUUM INTO, safe while the server runs) with "
                                   "its calibration, operating-context and ACL files into the new folder DEST, "
                                   "with a manifest (sizes, sha256, row counts, schema version).")
    p.add_argument("dest", help="the folder to create (must not exist)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=backup_command)
    p = sub.add_parser("restore", help="restore a backup folder over the database and its side files",
                       description="Verify the backup (manifest sizes and sha256, SQLite integrity check) and only "
                                   "then replace the database and side files; the replaced files are kept in "
                                   "<database folder>/cpersona-replaced-<time>/. Restart the server afterwards.")
    p.add_argument("src", help="the backup folder (made by cpersona backup)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=restore_command)


def _backed_up(r: dict) -> str:
    rows = r["rows"]
    return (f"backed up {rows.get('memories', 0)} memories, {rows.get('episodes', 0)} episodes, "
            f"{rows.get('profiles', 0)} profiles ({', '.join(f['role'] for f in r['files'])}) to {r['path']}")


def backup_command(settings: Settings, args: argparse.Namespace) -> int:
    from cpersona.service.backups import backup

    return run_on_files("backup", args.json, lambda tick: backup(settings, args.dest, tick), _backed_up)


def restore_command(settings: Settings, args: argparse.Namespace) -> int:
    from cpersona.service.backups import restore

    return run_on_files("restore", args.json, lambda tick: restore(settings, args.src, tick), lambda r: (
        f"restored {', '.join(r['files'])} from {r['restored_from']}; the replaced files are in {r['kept']}. "
        "Restart the server to load the restored calibration."))
