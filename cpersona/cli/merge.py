"""`cpersona merge SOURCE TARGET` (copy or move one agent's memories to another) and
`cpersona migrate-channel-axis` (repair memories filed under the bridge channel 'discord')."""

from __future__ import annotations

import argparse

from cpersona.cli.progress import answer, bar, fail, open_engine
from cpersona.config import Settings
from cpersona.errors import InvalidArgument


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="copy or move one agent's memories to another agent",
                       description="Merge the memories, episodes and profile of SOURCE into TARGET; all or nothing.")
    p.add_argument("source", help="the agent whose rows are copied")
    p.add_argument("target", help="the agent that receives them")
    p.add_argument("--move", action="store_true", help="delete the copied rows from SOURCE afterwards")
    p.add_argument("--strategy", choices=("skip", "prefer_source"), default="skip",
                   help="when both have a profile: keep TARGET's (skip, default) or take SOURCE's")
    p.add_argument("--dry-run", action="store_true", help="count what would happen, write nothing")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=merge_command)
    p = sub.add_parser("migrate-channel-axis", help="move memories of the bridge channel 'discord' to their channel",
                       description="Report (default) or apply the move of memories filed under channel 'discord' to "
                                   "the channel named in their metadata.session_id.")
    p.add_argument("--agent", default="", help="only this agent (default: every agent)")
    p.add_argument("--apply", action="store_true", help="change the rows (default: report only)")
    p.add_argument("--globalize-unrecoverable", action="store_true",
                   help="move the rows whose channel cannot be recovered to channel '' (all channels)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=channel_command)


def merge_command(settings: Settings, args: argparse.Namespace) -> int:
    engine = open_engine(settings)
    if engine is None:
        return fail("merge", f"no database at {settings.db_file}")
    try:
        with bar("merging", args.json) as tick:
            res = engine.merge_memories(args.source, args.target, args.strategy, "move" if args.move else "copy",
                                        args.dry_run, progress=tick)
    except InvalidArgument as err:
        return fail("merge", str(err))
    finally:
        engine.close()
    return answer("merge", res, args.json, lambda r: (
        f"{'would merge' if r['dry_run'] else 'merged'} {r['merged_memories']} memories ({r['skipped_memories']} "
        f"skipped), {r['merged_episodes']} episodes ({r['skipped_episodes']} skipped), profile "
        f"{'copied' if r['profile_copied'] else 'kept' if r['skipped_profile'] else 'none'} "
        f"from {r['source_agent_id']!r} to {r['target_agent_id']!r}"
        + (f"; left at source: {r['left_at_source']}" if "left_at_source" in r else "")))


def channel_command(settings: Settings, args: argparse.Namespace) -> int:
    engine = open_engine(settings)
    if engine is None:
        return fail("migrate-channel-axis", f"no database at {settings.db_file}")
    try:
        res = engine.migrate_channel_axis(args.agent, not args.apply, args.globalize_unrecoverable)
    except InvalidArgument as err:
        return fail("migrate-channel-axis", str(err))
    finally:
        engine.close()
    return answer("migrate-channel-axis", res, args.json, lambda r: (
        f"{r['recoverable_total']} recoverable, {r['unrecoverable_total']} unrecoverable memories under channel "
        f"'discord'; " + ("report only (--apply to change them)" if r["dry_run"] else
                          f"{r['migrated']} moved, {r['globalized']} made channel-global")))
