"""`cpersona merge SOURCE TARGET` (copy or move one agent's memories to another) and
`cpersona migrate-channel-axis` (repair memories filed under the bridge channel 'discord')."""

from __future__ import annotations

import argparse

from cpersona.cli.progress import run_on_engine
from cpersona.config import Settings


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


def _merged(r: dict) -> str:
    profile = "copied" if r["profile_copied"] else "kept" if r["skipped_profile"] else "none"
    return (f"{'would merge' if r['dry_run'] else 'merged'} {r['merged_memories']} memories "
            f"({r['skipped_memories']} skipped), {r['merged_episodes']} episodes ({r['skipped_episodes']} skipped), "
            f"profile {profile} from {r['source_agent_id']!r} to {r['target_agent_id']!r}"
            + (f"; {_left(r['left_at_source'])}" if "left_at_source" in r else ""))


_ONE = {"memories": "memory", "episodes": "episode", "profiles": "profile"}


def _left(counts: dict) -> str:
    """The rows a move left at the source, e.g. "left at source: 15 memories, 1 episode
    (already in the target: a move deletes only what it copied)"."""
    kinds = ", ".join(f"{n} {kind if n != 1 else _ONE.get(kind, kind)}" for kind, n in counts.items() if n)
    return (f"left at source: {kinds} (already in the target: a move deletes only what it copied)"
            if kinds else "nothing left at source")


def merge_command(settings: Settings, args: argparse.Namespace) -> int:
    return run_on_engine("merge", settings, args.json, lambda engine, tick: engine.merge_memories(
        args.source, args.target, args.strategy, "move" if args.move else "copy", args.dry_run, progress=tick),
        _merged)


def _channels(r: dict) -> str:
    done = "report only (--apply to change them)" if r["dry_run"] else \
        f"{r['migrated']} moved, {r['globalized']} made channel-global"
    return f"{r['recoverable_total']} recoverable, {r['unrecoverable_total']} unrecoverable memories under " \
           f"channel 'discord'; {done}"


def channel_command(settings: Settings, args: argparse.Namespace) -> int:
    return run_on_engine("migrate-channel-axis", settings, args.json, lambda engine, tick: engine.migrate_channel_axis(
        args.agent, not args.apply, args.globalize_unrecoverable), _channels)
