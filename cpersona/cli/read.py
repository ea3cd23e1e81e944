"""Read commands for people (tables) and scripts (`--json`), on the same service as the
MCP tools:

    cpersona stats  [--json]                           counts per agent, file, embedding model, queue
    cpersona list   [--agent A] [--limit N] [--project P] [--episodes] [--cursor C] [--json]
    cpersona recall "query" [--agent A] [--limit N] [--project P] [--verbose] [--json] [--load-model]

They read the database named by CPERSONA_DB_PATH: through the server running for that file
when there is one (its local endpoint, host/operations.py: warm, with its model), else in
this process — without loading the bundled model (keyword search; an HTTP or API backend is
used as configured; `recall --load-model` loads the bundled model here). Which of them
answered is said on stderr (and as `answered_by` in --json answers).
`recall` without --agent searches every agent and shows each agent's matches BEST FIRST
(the MCP tool orders worst → best for models; people read top-down); `--json` prints the
service's answers as they are (per agent, worst → best, as the tool returns them).
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from cpersona.cli.common import (
    OK,
    USAGE,
    add_json_flag,
    agent_label,
    console,
    fail,
    missing,
    open_engine,
    positive_int,
    print_json,
    short,
    table,
    wait_for_model,
)
from cpersona.config import Settings
from cpersona.policy.validate import MAX_LIMIT
from cpersona.service.answers import NO_MATCH_NOTE, NO_WORD_MATCH_NOTE, WITHHELD_WHY

#: Seconds a read command waits for the running server's answer.
SERVER_TIMEOUT_S = 120.0


def _read(settings: Settings, op: str, request: dict[str, Any], json_out: bool, load_model: bool = False
          ) -> tuple[dict[str, Any], str] | int:
    """(answer, who answered) of a read (module doc), or the exit status of a failure."""
    from cpersona.embedding.provider import resolve_mode
    from cpersona.host.local import ask

    path = settings.db_file
    if not settings.db_url and path is not None and not path.exists():
        return missing(settings)

    def engine():  # HTTP / API backends cost nothing to open; the bundled model only on request
        eng = open_engine(settings, must_exist=False)
        wait_for_model(eng, quiet=json_out)
        return eng

    in_process = engine if load_model or resolve_mode(settings) != "local" else None
    try:
        answer, who = ask(settings, op, request, SERVER_TIMEOUT_S, in_process)
    except (OSError, TimeoutError) as err:
        return fail(f"the running server did not answer: {err}", USAGE)
    if answer.get("ok") is False:
        return fail(str(answer.get("error")), USAGE)
    return answer, who


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# ------------------------------------------------------------------- stats
def stats_command(settings: Settings, args: argparse.Namespace) -> int:
    """Counts per agent, database file and size, embedding backend and stored-vector model, queue."""
    from cpersona.storage.schema import SCHEMA_VERSION

    read = _read(settings, "stats", {}, args.json)
    if isinstance(read, int):
        return read
    st, who = read
    if args.json:
        print_json({**st, "answered_by": who})
        return OK
    queue = st["queue"]
    db = table(title="Database", show_header=False)
    db.add_column("", style="bold")
    db.add_column("")
    db.add_row("path", st["path"])
    db.add_row("size", _size(st["size_bytes"]) + (" (incl. -wal)" if st["wal"] else ""))
    fts = "on" if st["fts"] else f"unavailable ({st['fts_problem']}): LIKE search" if st["fts_problem"] else "off"
    lexical = "pg_trgm" if st.get("backend") == "postgresql" else "FTS5"
    db.add_row("schema", f"{_schema_label(SCHEMA_VERSION, st.get('file_schema_version'))}, {lexical} {fts}")
    db.add_row("embedding backend", st["embedding_backend"])
    db.add_row("stored vectors", _vectors_line(st))
    db.add_row("task queue", f"{queue['pending']} pending, {queue['failed']} failed, {queue['retries']} retries")
    db.add_row("answered by", who)
    out = console()
    out.print(db)
    out.print(_agents_table(st["agents"]) if st["agents"] else "no memories yet")
    return OK


def _agents_table(per_agent: list[dict[str, Any]]):
    agents = table(title="Agents")
    for name, justify in (("agent", "left"), ("memories", "right"), ("locked", "right"), ("no vector", "right"),
                          ("episodes", "right"), ("profile", "left"), ("last memory (UTC)", "left")):
        agents.add_column(name, justify=justify)
    for a in per_agent:
        agents.add_row(agent_label(a["agent_id"]), str(a["memories"]), str(a["locked"]), str(a["without_vector"]),
                       str(a["episodes"]), "yes" if a["profiles"] else "no", a["last_memory"] or "–")
    total = [sum(a[k] for a in per_agent) for k in ("memories", "locked", "without_vector", "episodes")]
    with_profile = sum(1 for a in per_agent if a["profiles"])
    noun = "agent" if len(per_agent) == 1 else "agents"
    agents.add_row(f"{len(per_agent)} {noun}", *(str(t) for t in total), f"{with_profile} with", "", style="bold")
    return agents


# -------------------------------------------------------------------- list
#: What `list` shows per kind: title, columns, and a row's cells.
_LISTS = {
    "memories": ("Memories", ("id", "agent", "project", "channel", "created (UTC)", "lock", "content"),
                 lambda m: (str(m["id"]), agent_label(m["agent_id"]), m["project_id"] or "–", m["channel"] or "–",
                            m["created_at"][:16], "locked" if m["locked"] else "", short(m["content"]))),
    "episodes": ("Episodes", ("id", "agent", "project", "channel", "created (UTC)", "resolved", "summary"),
                 lambda e: (str(e["id"]), agent_label(e["agent_id"]), e["project_id"] or "–", e["channel"] or "–",
                            e["created_at"][:16], "yes" if e["resolved"] else "", short(e["summary"]))),
}


#: Listing columns left out when no row of the page has a value there, so the text keeps room
#: in an 80-column terminal (a fresh user saw memories cut to six characters); and the widest
#: the others may take (longer values end in "…").
_OPTIONAL = frozenset({"project", "channel", "lock", "resolved"})
_CAPS = {"id": 8, "agent": 14, "project": 10, "channel": 10, "created (UTC)": 16}


def list_command(settings: Settings, args: argparse.Namespace) -> int:
    """Newest memories (or episodes) first, all agents unless --agent."""
    kind = "episodes" if args.episodes else "memories"
    read = _read(settings, "list", {"agent": args.agent, "limit": args.limit, "project": args.project,
                                    "cursor": args.cursor or "", "episodes": args.episodes}, args.json)
    if isinstance(read, int):
        return read
    res, who = read
    if args.json:
        print_json({**res, "answered_by": who})
        return OK
    title, columns, cells = _LISTS[kind]
    rows = table(title=f"{title}, newest first ({res['count']} shown)")
    shown = [cells(row) for row in res[kind]]
    keep = [i for i, name in enumerate(columns)
            if name not in _OPTIONAL or any(cell[i] not in ("", "–") for cell in shown)]
    for i in keep:
        name = columns[i]
        wide = name in ("content", "summary")
        rows.add_column(name, justify="right" if name == "id" else "left", no_wrap=not wide,
                        max_width=_CAPS.get(name), min_width=24 if wide else None,
                        overflow="fold" if wide else "ellipsis")
    for row in shown:
        rows.add_row(*(row[i] for i in keep))
    out = console()
    out.print(rows if res[kind] else f"no {kind}")
    if res.get("next_cursor"):
        out.print(f"[dim]more: --cursor '{res['next_cursor']}'[/dim]")
    out.print(f"[dim]answered by {who}[/dim]")
    return OK


# ------------------------------------------------------------------ recall
def recall_command(settings: Settings, args: argparse.Namespace) -> int:
    """Hybrid recall for one agent, or each agent in turn; best match first."""
    read = _read(settings, "recall", {"text": args.text, "agent": args.agent, "limit": args.limit,
                                      "project": args.project, "deep": args.deep, "verbose": args.verbose},
                 args.json, load_model=args.load_model)
    if isinstance(read, int):
        return read
    found, who = read
    answers = found["answers"]
    if args.json:  # best match first, like the table (the tool answers worst first, as the original did)
        for res in answers.values():
            res["messages"] = res["messages"][::-1]
            res["answered_by"] = who
            if "fix" in res.get("withheld", {}):  # the service names the tool's argument
                res["withheld"]["fix"] = "cpersona recall --deep halves the bar"
        print_json(answers if args.agent is None else answers[args.agent])
        return OK
    _print_recall(args.text, answers, found["mismatch"], args.deep)
    _print_keyword_only(found["without_vector"])
    console().print(f"[dim]answered by {who}[/dim]")
    return OK


def _schema_label(ours: int, stamped: int | None) -> str:
    """What the schema version means: ours is the format this server reads and writes; a
    file of the original's 2.6 line keeps its own, higher stamp (its added tables are left
    as they are), which is no downgrade."""
    if stamped is None or stamped == ours:
        return f"v{ours}"
    writer = "the original CPersona 2.6 line" if stamped > ours else "another release"
    return f"v{ours} (this server's format; file stamped v{stamped} by {writer}, opened in place, its own tables kept)"


def _vectors_line(st: dict[str, Any]) -> str:
    """The model of the stored vectors, a re-embedding in progress, unrecorded vectors."""
    unrecorded, progress = st["unrecorded"], st["reembed"]
    if unrecorded:
        dims = ", ".join(f"{n} × {d}-d" for d, n in sorted(unrecorded["dims"].items()))
        labels = ", ".join(map(repr, unrecorded["labels"])) or "none"
        return (f"{unrecorded['rows']} vectors of an unrecorded model ({dims}; labels: {labels}); the server "
                "verifies or re-embeds them at its next start")
    if st["stored_model"] is None:
        return "none recorded yet"
    line = f"{st['stored_model']} ({st['stored_dim']}-d)"
    if progress:
        line += (f"; {progress['remaining']} of {progress['total']} rows still hold vectors of "
                 f"{progress['from_model']} ({progress['from_dim']}-d): re-embedding in the server's background "
                 "queue, or now with `cpersona reembed`")
    return line


def _print_keyword_only(waiting: int) -> None:
    """Say when rows of the searched agents have no vector and so are found by keyword only."""
    if waiting:
        console().print(f"[dim]note: {waiting} rows have no vector yet and are matched by keyword only; "
                        "`cpersona reembed` embeds them now (the server's task queue does it when it runs)[/dim]")


def _print_recall(query: str, answers: dict[str, Any], mismatch: bool = False, deep: bool = False) -> None:
    rows = table(title=f"recall {query!r} — best match first")
    for name in ("#", "agent", "ref", "match", "content"):
        rows.add_column(name, no_wrap=name != "content")
    advisory = next((a["advisory"] for a in answers.values() if a.get("advisory")), None)
    shown = 0
    for agent, res in answers.items():
        for rank, msg in enumerate(reversed(res["messages"]), 1):
            reason = msg.get("match_reason") or {}
            match = f"{reason.get('signal', '')} {reason['score']:.3f}" if "score" in reason else ""
            rows.add_row(str(rank), agent_label(agent), msg.get("ref", ""), match, short(msg["content"]))
            shown += 1
    out = console()
    out.print(rows if shown else "nothing relevant found")
    # e.g. a misspelt agent id: it has no rows; "nothing matched" only when no agent answered
    nothing = (NO_MATCH_NOTE, NO_WORD_MATCH_NOTE)
    notes = {a["note"] for a in answers.values() if a.get("note") and not (shown and a["note"] in nothing)}
    for note in sorted(notes):
        out.print(f"[dim]note: {note}[/dim]")
    withheld = sum(a.get("withheld", {}).get("rows", 0) for a in answers.values())
    if withheld and not shown:
        rows_word = "row" if withheld == 1 else "rows"
        # the identifiers / names that no matched row mentions, when that is why (service/recall.py)
        why = sorted({a["withheld"].get("why") for a in answers.values() if a.get("withheld")} - {WITHHELD_WHY, None})
        held = f"held back — {'; '.join(why)}" if why else "matched too weakly to count as an answer"
        out.print(f"[dim]{withheld} {rows_word} {held}"
                  f"{', even at the half bar of --deep' if deep else ': --deep halves the bar'}[/dim]")
    if advisory:
        note = advisory.get("reason") or advisory.get("evidence") or "search is degraded"
        out.print(f"[dim]note: {note}[/dim]")
        if mismatch:  # this command's model is not the database's
            from cpersona.embedding.gateway import FIX

            out.print(f"[dim]{advisory.get('evidence')}; to fix: {FIX}[/dim]")


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register stats, list and recall, each with its own flags."""
    p = sub.add_parser("stats", help="counts per agent, file, embedding model, queue",
                       description="Counts per agent, the database file, the embedding model and the task queue.")
    add_json_flag(p)
    p.set_defaults(func=stats_command)
    p = sub.add_parser("list", help="newest memories (or episodes) first",
                       description="List memories (or --episodes), newest first.")
    p.add_argument("--agent", help="only this agent (default: every agent)")
    p.add_argument("--limit", type=positive_int, help="rows to show (default 20; at most 500 memories / 200 episodes)")
    p.add_argument("--project", help="project id ('' = global pool only)")
    p.add_argument("--episodes", action="store_true", help="list session summaries instead of memories")
    p.add_argument("--cursor", help="continue a listing (the cursor printed after the last page)")
    add_json_flag(p)
    p.set_defaults(func=list_command)
    p = sub.add_parser("recall", help="hybrid recall, best match first",
                       description="Recall memories for a query, best match first — also with --json (the recall "
                                   "tool lists them best last, as the original CPersona did).")
    p.add_argument("text", help="the query")
    p.add_argument("--agent", help="the agent (default: every agent in turn)")
    p.add_argument("--limit", type=partial(positive_int, most=MAX_LIMIT),
                   help=f"matches per agent (default 5, at most {MAX_LIMIT})")
    p.add_argument("--project", help="project id ('' = global pool only)")
    p.add_argument("--deep", action="store_true", help="the nearest rows even when none clearly answers the query")
    p.add_argument("--verbose", action="store_true", help="every channel's score in match_reason (with --json)")
    p.add_argument("--load-model", action="store_true",
                   help="with no server running for the file, load the bundled model here (default: keyword search)")
    add_json_flag(p)
    p.set_defaults(func=recall_command)

