"""`cpersona import FILE` / `cpersona import --from-db FILE`: bring memories in from a cpersona
export (ours or the original CPersona's 1.0 / 1.1), the reference MCP memory server's
knowledge-graph memory.jsonl, JSONL / CSV rows {content, timestamp?, agent_id?, tags?}, or a
database file of any CPersona version (read-only, never migrated)."""

from __future__ import annotations

import argparse

from cpersona.cli.progress import fail, run_on_engine
from cpersona.config import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import memories from an export, another memory server, or a database file",
                       description="Import memories. The whole file is checked first: a defect anywhere imports "
                                   "nothing. Rows already present are skipped (a re-import adds nothing); imported "
                                   "rows are embedded by the server's background queue.")
    p.add_argument("file", nargs="?", help="the file to import (format detected from its content)")
    p.add_argument("--from-db", metavar="FILE", help="read another CPersona database file (schema v2…v21, or ours)")
    p.add_argument("--agent", default="", help="put every row under this agent (default: each row's agent_id)")
    p.add_argument("--dry-run", action="store_true", help="show what would be imported, write nothing")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=import_command)


def _summary(res: dict) -> str:
    verb = "would import" if res["dry_run"] else "imported"
    kept = f", {res['embeddings_kept']} vectors kept" if res.get("embeddings_kept") else ""
    line = (f"{verb} {res['imported_memories']} memories ({res['skipped_memories']} skipped), "
            f"{res['imported_episodes']} episodes ({res['skipped_episodes']} skipped), "
            f"{res.get('profiles_updated', 0)} profiles{kept} — format {res.get('format')}")
    return f"{line}\n  {res['vector_note']}" if res.get("vector_note") else line


def import_command(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from cpersona.storage.originals import is_sqlite

    if bool(args.file) == bool(args.from_db):
        return fail("import", "name one file: cpersona import FILE, or cpersona import --from-db FILE")
    if args.from_db and not Path(args.from_db).is_file():
        return fail("import", f"--from-db {args.from_db}: no such file")
    if args.from_db and not is_sqlite(Path(args.from_db)):
        return fail("import", f"--from-db {args.from_db}: not a SQLite database file")
    target = settings.db_file
    if args.dry_run and not settings.db_url and target is not None and not target.exists():
        settings = settings.model_copy(update={"db_path": ":memory:"})  # a dry run creates no file: an empty store
    return run_on_engine("import", settings, args.json, lambda engine, tick: engine.import_memories(
        args.from_db or args.file, args.agent, args.dry_run, confined=False, progress=tick), _summary,
        must_exist=False)
