"""Answering local requests (host/operations.py) in the two places they are answered:

* in a running server: `start_endpoint(settings, engine)` serves them on the local channel
  of its database once its embedding model is ready (host/endpoint.py);
* in the asking process when no server runs: `answer_here(op, args)` opens the database
  keyword-only — no embedding model is loaded, so it answers in well under a second — runs
  the same operation and closes it. Rows it stores have no vector yet: the next server
  started on the file queues their embedding (jobs/task_queue.py sweeps rows without one).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from cpersona.config import Settings
from cpersona.host import READ_EVENTS, operations
from cpersona.host.claude_code import HostContext
from cpersona.host.endpoint import LocalEndpoint
from cpersona.policy.projects import OperatingContext
from cpersona.service.context_block import recall_request
from cpersona.service.engine import Engine
from cpersona.util import local_channel
from cpersona.util.places import db_target

log = logging.getLogger(__name__)
#: Seconds the endpoint waits for the server's model before answering without it, in steps.
MODEL_WAIT_S = 300.0
WAIT_STEP_S = 0.5
#: The agent of the warm-up recall (no rows: nothing is bumped or written).
WARM_UP_AGENT = "cpersona:warm-up"
#: The answer to a recall while the server's model loads (local_channel.ask_server: the asker
#: then answers itself).
NOT_READY = {"ok": False, "not_ready": True, "error": "the server is still loading its embedding model"}


def host_context(settings: Settings, engine: Engine) -> HostContext:
    return HostContext(engine, settings, db_target(settings.db_url, settings.db_path).key,
                       OperatingContext.from_settings(settings))


def _warm(engine: Engine, ready: threading.Event, endpoint: LocalEndpoint) -> None:
    """With the bundled model (the one a server loads in the background): wait for it (until
    the endpoint closes, at most MODEL_WAIT_S), then run one recall (of an agent with no rows:
    it writes nothing) so the first hook does not pay for what a process's first recall loads
    (the word prior's vocabulary, which that model shares: retrieval/word_prior.py); then let
    recalls in. Other backends have nothing to wait for: recalls are let in at once."""
    wait = getattr(engine.embedder, "wait_ready", None)
    if wait is not None:
        deadline = time.monotonic() + MODEL_WAIT_S
        while not endpoint.closed and time.monotonic() < deadline and not wait(WAIT_STEP_S):
            pass
        try:
            if not endpoint.closed:
                engine.recall(recall_request(WARM_UP_AGENT, "warm up the recall path", 1, None))
        except Exception:  # the endpoint still serves; the first request pays instead
            log.exception("warming the recall path for the local endpoint failed")
    ready.set()


def start_endpoint(settings: Settings, engine: Engine) -> LocalEndpoint | None:
    """Serve local requests for `engine`'s database (None when CPERSONA_LOCAL_ENDPOINT is off).
    Returns at once; the endpoint is claimed in the background (LocalEndpoint.start). Until the
    server's model is loaded and its recall path warm, a request that recalls is answered
    NOT_READY (the asker answers it itself, keyword only); stores and listings are served at
    once (a store waits for the model as the tool does, then its row is embedded by the queue)."""
    if not settings.local_endpoint:
        return None
    ctx = host_context(settings, engine)
    ready = threading.Event()

    def handle(op: str, args: dict[str, Any]) -> dict[str, Any]:
        if not ready.is_set() and (op == "recall" or _reads_only(op, args)):
            return NOT_READY
        return operations.run(ctx, op, args)

    endpoint = LocalEndpoint(ctx.db_key, handle)
    endpoint.start()
    endpoint.spawn(_warm, engine, ready, endpoint, name="cpersona-endpoint-warm-up")
    return endpoint


def _reads_only(op: str, args: dict[str, Any]) -> bool:
    """A context request or a hook that only reads (the CLI's read commands check the file first)."""
    return op == "context" or (op == "hook" and args.get("event") in READ_EVENTS)


def answer_here(op: str, args: dict[str, Any], settings: Settings | None = None,
                engine: Engine | None = None) -> dict[str, Any]:
    """Answer one request in this process (module doc). `engine`: one the caller opened (kept
    open); default a keyword-only engine opened and closed here. A read of a database file that
    does not exist answers what an empty one would, without creating it."""
    settings = settings or Settings.from_env()
    if engine is None and _reads_only(op, args) and not settings.db_url and settings.db_file is not None \
            and not settings.db_file.exists():
        return {"ok": True, "output": "", "note": f"no database at {settings.db_file} yet", "text": "", "rows": 0}
    own = engine is None
    engine = engine or keyword_engine(settings)
    try:
        return operations.run(host_context(settings, engine), op, args)
    finally:
        if own:
            engine.close()


def keyword_engine(settings: Settings) -> Engine:
    """An engine without an embedding backend, background work or model authority."""
    return Engine(settings, embedder=None, start_background=False, model_authority=False)


#: Who answered a request, as `ask` reports it.
BY_SERVER = "the running server"


def by_here(engine: Engine | None) -> str:
    """Who answered in this process: keyword only when it had no embedding backend."""
    keywords = ", keyword only" if engine is None or engine.embedder is None else ""
    return f"this process{keywords} (no server is running for this database)"


def ask(settings: Settings, op: str, args: dict[str, Any], timeout: float,
        engine_factory: Callable[[], Engine] | None = None) -> tuple[dict[str, Any], str]:
    """(answer, who answered): the server running for the database when there is one, else
    this process — keyword only, or on the engine `engine_factory` opens (closed here).
    Raises ChannelError / TimeoutError when a server took the request and did not answer."""
    answer = local_channel.ask_server(db_target(settings.db_url, settings.db_path).key, op, args, timeout)
    if answer is not None:
        return answer, BY_SERVER
    engine = engine_factory() if engine_factory is not None else None
    try:
        return answer_here(op, args, settings, engine), by_here(engine)
    finally:
        if engine is not None:
            engine.close()
