"""The requests of the local endpoint, as one table — answered the same way by a running
server (host/endpoint.py) and, when none runs, in the asking process on a keyword-only engine
(host/cold.py), so a hook or CLI command gets the same answer shape either way.

    status    {ok, pid, version, database, embedding, ready, paused}
    hook      {event, input[, agent]} → {ok, output, note}  (host/claude_code.py)
    context   {query?, budget?, agent?, cwd?, session?} → {ok, text, tokens, rows}
    forget    {session, agent?} → {ok, deleted_memories, deleted_episodes, kept, paused}
    stats     {} → the stats tool's answer + schema, embedding_backend
    list      {agent?, limit?, project?, cursor?, episodes?} → list_memories / list_episodes
    recall    {text, agent?, limit?, project?, deep?, verbose?} → {answers: {agent: recall answer},
              mismatch, without_vector}

Every operation calls the public service methods — the MCP tools' validation, pause and
project rules apply. A failure is an answer, never an exception: `{ok: false, error}` naming
the argument (InvalidArgument, a malformed hook input), `{ok: false, error, error_kind,
retryable}` for an unavailable store; anything else is logged with its traceback and answered
as an internal error.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, Protocol

from cpersona import __version__
from cpersona.embedding.base import describe
from cpersona.errors import InvalidArgument, StorageUnavailable
from cpersona.host import claude_code
from cpersona.host.capture_state import valid_session_id
from cpersona.host.claude_code import HostContext
from cpersona.policy import validate
from cpersona.service import capture, context_block

log = logging.getLogger(__name__)
#: Largest token budget a context request may ask for.
MAX_BUDGET = 100_000


class ServerTools(capture.SessionTools, Protocol):
    """What the endpoint's operations use of the engine (`Engine` has it)."""

    @property
    def embedder(self) -> Any: ...

    @property
    def advisory(self) -> Any: ...

    def stats(self) -> dict[str, Any]: ...

    def persistence_status(self) -> dict[str, Any]: ...


def _ready(tools: ServerTools) -> bool:
    embedder = tools.embedder
    return embedder is not None and bool(getattr(embedder, "ready", lambda: True)())


def status(ctx: HostContext, args: dict[str, Any]) -> dict[str, Any]:
    tools: ServerTools = ctx.tools  # type: ignore[assignment]
    return {"ok": True, "pid": os.getpid(), "version": __version__, "database": ctx.db_key,
            "embedding": describe(tools.embedder), "ready": _ready(tools),
            "paused": bool(tools.persistence_status().get("paused"))}


def hook(ctx: HostContext, args: dict[str, Any]) -> dict[str, Any]:
    out = claude_code.answer(ctx, str(args.get("event", "")), args.get("input"), args.get("agent"))
    return {"ok": True, "output": out.output, "note": out.note}


def _agent(ctx: HostContext, args: dict[str, Any]) -> str:
    agent = args.get("agent") or ctx.settings.hooks_agent_id
    if not isinstance(agent, str):
        raise InvalidArgument("agent", "must be a string")
    return agent


def context(ctx: HostContext, args: dict[str, Any]) -> dict[str, Any]:
    """A prompt block for `query`, or the session block when there is none."""
    agent = _agent(ctx, args)
    cwd = str(args.get("cwd") or "")
    project = args["project"] if isinstance(args.get("project"), str) else claude_code.project_for(ctx, cwd, agent)
    query = args.get("query") or ""
    if not isinstance(query, str):
        raise InvalidArgument("query", "must be a string")
    default = ctx.settings.hooks_prompt_tokens if query.strip() else ctx.settings.hooks_session_tokens
    budget = validate.limit("budget", args.get("budget", default), maximum=MAX_BUDGET, minimum=0)
    if query.strip():
        block = context_block.prompt_block(ctx.tools, agent, project, query, budget)
    else:
        topic = " ".join(w for w in (project, claude_code.repository_folder(cwd).name if cwd else "") if w)
        block = context_block.session_block(ctx.tools, agent, project, topic, budget)
    return {"ok": True, "text": block.text, "tokens": block.tokens, "rows": block.rows}


def forget(ctx: HostContext, args: dict[str, Any]) -> dict[str, Any]:
    sid = valid_session_id(args.get("session"))
    return {"ok": True, **capture.forget_session(ctx.tools, capture.HostSession(claude_code.HOST, sid,
                                                                                _agent(ctx, args)))}


def stats(ctx: HostContext, args: dict[str, Any]) -> dict[str, Any]:
    from cpersona.storage.schema import SCHEMA_VERSION

    tools: ServerTools = ctx.tools  # type: ignore[assignment]
    return {**tools.stats(), "schema": SCHEMA_VERSION, "embedding_backend": describe(tools.embedder)}


def listing(ctx: HostContext, args: dict[str, Any]) -> dict[str, Any]:
    lister = ctx.tools.list_episodes if args.get("episodes") else ctx.tools.list_memories
    limit = args.get("limit")
    page = lister(args.get("agent"), 20 if limit is None else limit, args.get("project"), args.get("cursor") or "")
    return dict(page)


def recall(ctx: HostContext, args: dict[str, Any]) -> dict[str, Any]:
    """Each asked agent's recall answer (every agent when `agent` is absent), worst → best."""
    tools: ServerTools = ctx.tools  # type: ignore[assignment]
    st = tools.stats()
    agents = [args["agent"]] if args.get("agent") is not None else [a["agent_id"] for a in st["agents"]]
    limit = 5 if args.get("limit") is None else args["limit"]
    answers = {agent: tools.recall(context_block.recall_request(agent, args.get("text", ""), limit,
                                                                args.get("project"), deep=bool(args.get("deep"))),
                                   verbose=bool(args.get("verbose")))
               for agent in agents}
    waiting = sum(a["without_vector"] for a in st["agents"] if a["agent_id"] in answers)
    return {"answers": answers, "mismatch": getattr(tools.advisory, "state", "") == "mismatch",
            "without_vector": waiting if tools.embedder is not None else 0}


#: operation → its handler.
OPS: dict[str, Callable[[HostContext, dict[str, Any]], dict[str, Any]]] = {
    "status": status, "hook": hook, "context": context, "forget": forget,
    "stats": stats, "list": listing, "recall": recall,
}


def run(ctx: HostContext, op: str, args: dict[str, Any]) -> dict[str, Any]:
    """The answer to one request (module doc: never raises)."""
    handler = OPS.get(op)
    if handler is None:
        return {"ok": False, "error": f"op: unknown operation {op!r}; known: {', '.join(OPS)}"}
    try:
        return handler(ctx, args)
    except InvalidArgument as err:
        return {"ok": False, "error": str(err)}
    except StorageUnavailable as err:
        return {"ok": False, "error": str(err), **err.fields()}
    except Exception as err:
        log.exception("local request %s failed", op)
        return {"ok": False, "error": f"internal error in {op}: {type(err).__name__}: {err}"}
