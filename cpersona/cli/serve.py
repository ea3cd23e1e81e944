"""`cpersona serve` (the default command): run the MCP server until the client disconnects
or Ctrl-C.

`--transport`, `--host` and `--port` set the settings `transport`, `http_host` and
`http_port` for this run; a flag given wins over the environment (CPERSONA_TRANSPORT,
CPERSONA_HTTP_HOST, CPERSONA_HTTP_PORT) and the settings file, and is checked by the same
rule (a bad value is a usage error naming the flag, exit 2).

The engine's background work — the bundled model's loading, the task queue, the startup
calibration — starts with the process, in every transport, so the first recall of a
session gets vectors (a recall or store waits up to CPERSONA_MODEL_WAIT_SECONDS for a model
still loading). One line on stderr says what runs: version, transport, database, embedding
backend, and how to stop it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cpersona import __version__
from cpersona.cli.common import backend_label
from cpersona.cli.settings import unknown_variables
from cpersona.config import LEGACY_DB_PATH, SETTINGS, Setting, Settings
from cpersona.errors import ConfigError
from cpersona.mcp.pipes import release_all

if TYPE_CHECKING:
    from cpersona.host.endpoint import LocalEndpoint
    from cpersona.service.engine import Engine

#: How long a thread may hold Python's GIL while another waits for it (CPython's default is
#: 5 ms). A recall's threads hand work to each other (the query's embedding, the word MATCH,
#: the vector scan run beside the trigram MATCH and meet again), and each hand-over where
#: both want to run Python could wait a whole interval (measured:
#: benchmarks/rounds/2026-11-30-round-06-latency.md).
SWITCH_INTERVAL_S = 0.0005
#: Seconds Ctrl-C waits for the engine to close (queue stopped, database closed) before exiting,
#: and, first, for the local endpoint's requests in flight.
CLOSE_TIMEOUT_SECS = 5.0
ENDPOINT_WAIT_SECS = 1.0


#: The flags of `cpersona serve`, each the command-line form of one declared setting (field name).
FLAGS = {"--transport": "transport", "--host": "http_host", "--port": "http_port"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve MCP on stdio (or streamable HTTP: --transport streamable-http)",
                       description="Serve the memory over MCP. Configured by CPERSONA_* variables or the settings "
                                   "file (`cpersona config` shows the effective values); a flag given here wins "
                                   "over both.")
    by_field = {s.field: s for s in SETTINGS}
    for flag, field in FLAGS.items():
        setting = by_field[field]
        metavar = "{" + ",".join(setting.choices) + "}" if setting.choices else flag.removeprefix("--").upper()
        p.add_argument(flag, dest=field, type=_flag_type(setting), default=None, metavar=metavar,
                       help=f"{setting.description} Default: {setting.env} or the settings file, "
                            f"else {setting.default}.")
    p.set_defaults(func=serve)


def _flag_type(setting: Setting) -> Callable[[str], Any]:
    """argparse type of one flag: the setting's own rule (Setting.parse), so a flag accepts
    exactly what its variable accepts; a bad value names the rule."""

    def parse(text: str) -> Any:
        try:
            return setting.parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"expected {err}, got {text!r}") from None

    return parse


def with_flags(settings: Settings, args: argparse.Namespace | None) -> Settings:
    """`settings` with the values of the serve flags that were given (each already checked
    by its setting's rule); flags not given leave the environment's or file's value."""
    given = {field: getattr(args, field) for field in FLAGS.values() if getattr(args, field, None) is not None}
    return settings.model_copy(update=given) if given else settings


def startup_line(settings: Settings, engine: Engine) -> str:
    """The one line printed on stderr at start."""
    from cpersona.mcp.server import HTTP_PATH

    if settings.transport == "stdio":
        where, stop = "MCP on stdio", "stop: Ctrl-C or close stdin"
    else:
        where, stop = f"MCP at http://{settings.http_host}:{settings.http_port}{HTTP_PATH}", "stop: Ctrl-C"
    db = engine.db.path if settings.db_url else str(settings.db_file or settings.db_path)  # a URL without password
    if not settings.db_url and settings.db_file is not None and settings.db_file.parts[-2:] == LEGACY_DB_PATH.parts:
        db += " (the original CPersona's data/cpersona.db in the working directory)"
    loading = "" if engine.embedder is None or engine.embedder.ready() else ", loading"
    return f"cpersona {__version__} — {where} — database {db} — embedding {backend_label(engine.embedder)}" \
           f"{loading} — {stop}"


def serve(settings: Settings, args: argparse.Namespace | None = None) -> int:
    """Run the MCP server until the client disconnects (stdio) or Ctrl-C. Returns 0.
    The serve flags in `args` win over `settings` (with_flags). Access (tokens, ACL file,
    Host/Origin rules) is checked before the database is opened; the once-per-start update
    check runs in the background."""
    from cpersona.host.local import start_endpoint
    from cpersona.mcp.hints import query_hint
    from cpersona.mcp.http_app import build_http_app, listen, serve_http
    from cpersona.mcp.security import Security
    from cpersona.mcp.server import build_server
    from cpersona.mcp.stdio import run_stdio
    from cpersona.service.engine import Engine

    settings = with_flags(settings, args)
    security = Security.from_settings(settings)
    listener = None if settings.transport == "stdio" else listen(settings)  # a port in use: one line, nothing started
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        engine = Engine(settings, start_background=True)
    except BaseException:
        if listener is not None:
            listener.close()
        raise
    endpoint = None
    try:
        engine.updates.start()
        endpoint = start_endpoint(settings, engine)  # hooks and CLI of this user: docs/memory-without-asking.md
        app = build_server(engine, settings.log_level, security.guard(settings))
        if settings.transport == "stdio":
            _stop_on_interrupt(engine, endpoint)  # before the startup line: a Ctrl-C right after it is handled
        print(startup_line(settings, engine), file=sys.stderr, flush=True)
        for note in unknown_variables():
            print(f"cpersona: warning: {note}", file=sys.stderr, flush=True)
        hint = query_hint(engine)
        if settings.transport == "stdio":
            run_stdio(app, hint)
        else:  # uvicorn stops on Ctrl-C by itself and returns here
            if security.rules is None:
                raise ConfigError("streamable HTTP needs the access rules decided at start")
            serve_http(build_http_app(app, settings, security.check, security.rules, hint), settings, listener)
    except KeyboardInterrupt:
        pass
    finally:
        if endpoint is not None:
            endpoint.close()
        engine.close()
        if listener is not None:
            listener.close()
    return 0


def _stop_on_interrupt(engine: Engine, endpoint: LocalEndpoint | None = None) -> None:
    """Ctrl-C or SIGTERM (how hosts stop a server) on stdio: close the engine (bounded) and
    exit 0 at once. The SDK reads stdin in a worker thread that a signal cannot interrupt, so
    the usual KeyboardInterrupt would leave the process waiting for the next line of input;
    SIGTERM's default would end it without closing — an embedding worker stopped by SIGSTOP
    then stayed behind. A second signal kills at once. The local endpoint (if any) stops first:
    no request of it runs while the engine closes."""

    def stop(signum: int, frame: object) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        def close() -> None:
            if endpoint is not None:  # briefly: the engine's close makes a request's embedding fail fast
                endpoint.close(wait_s=ENDPOINT_WAIT_SECS)
            engine.close()

        closer = threading.Thread(target=close, name="cpersona-close", daemon=True)
        closer.start()
        closer.join(CLOSE_TIMEOUT_SECS)
        release_all()  # stdin / stdout as the host gave them (os._exit skips the transport's own cleanup)
        print(f"cpersona: stopped ({'Ctrl-C' if signum == signal.SIGINT else 'SIGTERM'})", file=sys.stderr, flush=True)
        os._exit(0)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
