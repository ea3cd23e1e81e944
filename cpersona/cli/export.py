"""`cpersona export FILE`: write memories to a `cpersona-export/1.0` JSONL file (any path:
the user names it; the MCP tool is confined to the export folder)."""

from __future__ import annotations

import argparse

from cpersona.cli.progress import run_on_engine
from cpersona.config import Settings


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write memories to a JSONL file (backup, move, share)",
                       description="Write the memories, episodes and profiles of one agent (default: every agent) "
                                   "to a cpersona-export/1.0 JSONL file, atomically, from one consistent snapshot.")
    p.add_argument("file", help="the JSONL file to write (replaced atomically if it exists)")
    p.add_argument("--agent", default="", help="only this agent (default: every agent)")
    p.add_argument("--embeddings", action="store_true",
                   help="include each memory's vector and its model (an import with the same model keeps them)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=export_command)


def export_command(settings: Settings, args: argparse.Namespace) -> int:
    return run_on_engine("export", settings, args.json, lambda engine, tick: engine.export_memories(
        args.agent, args.file, args.embeddings, confined=False, progress=tick), lambda r: (
        f"exported {r['memories']} memories, {r['episodes']} episodes, {r['profiles']} profiles to {r['path']}"
        + (f" ({r['embeddings']} with vectors)" if args.embeddings else "")))
