"""The `cpersona` command.

    cpersona                 serve MCP (stdio by default; CPERSONA_TRANSPORT=streamable-http)
    cpersona serve           same
    cpersona embed-server    HTTP /embed server with the bundled model
    cpersona reembed         re-embed stored rows after an embedding-model change
    cpersona stats | list | recall "query" | store "text"   for people (tables; see cpersona/human.py)

Configuration errors print ONE line to stderr and exit with status 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys

from cpersona import human
from cpersona import __version__
from cpersona.core.config import ConfigError, Settings
from cpersona.core.schema import SchemaTooNew

log = logging.getLogger("cpersona")


def _setup_logging(level: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=level.upper(), format="cpersona %(levelname)s %(name)s: %(message)s")


def _limit_math_threads(threads: int) -> None:
    """Cap BLAS/OpenMP threads (CPERSONA_EMBEDDING_THREADS, default 1): the server shares
    the CPU with its host, and an oversubscribed BLAS pool makes one embedding 20× slower
    on a busy machine."""
    import numpy  # noqa: F401 — load numpy's BLAS first: threadpoolctl limits loaded libraries only
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)


def serve(settings: Settings, args: argparse.Namespace | None = None) -> int:
    """Run the MCP server until the client disconnects."""
    from cpersona.core.engine import Engine
    from cpersona.mcp.server import build_server

    if settings.transport != "stdio":
        _check_http_auth(settings)
    engine = Engine(settings, start_background=False)
    try:
        address = (settings.http_host, settings.http_port)
        app = build_server(engine, settings.log_level, settings.auth_token, address)
        if settings.transport == "stdio":
            app.run("stdio")
        else:
            app.run("streamable-http", host=settings.http_host, port=settings.http_port)
    finally:
        engine.close()
    return 0


def _check_http_auth(settings: Settings) -> None:
    if not settings.auth_token and not settings.allow_unauthenticated_http:
        raise ConfigError(
            f"CPERSONA_TRANSPORT=streamable-http on {settings.http_host}:{settings.http_port} needs "
            "CPERSONA_AUTH_TOKEN, or CPERSONA_ALLOW_UNAUTHENTICATED_HTTP=true to serve without auth"
        )


def reembed_command(settings: Settings, args: argparse.Namespace) -> int:
    """Re-embed stale rows with a progress bar; resumable (Ctrl-C keeps finished batches)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from cpersona.core.embedding.base import EmbeddingError
    from cpersona.core.engine import Engine
    from cpersona.core.reembed import reembed

    engine = Engine(settings, start_background=False)
    engine.start_background()
    columns = (TextColumn("re-embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    try:
        with Progress(*columns, transient=False) as bar:
            task = bar.add_task("rows", total=None)
            report = reembed(engine, args.batch, args.all, lambda done, total: bar.update(task, completed=done, total=total))
    except EmbeddingError as err:
        print(f"cpersona reembed: {err}", file=sys.stderr)
        return 1
    finally:
        engine.close()
    print(f"re-embedded {report.rows} of {report.total} rows with {report.model} ({report.dim}-d)")
    return 0


def _embed_server(argv: list[str]) -> int:
    from cpersona import embed_server

    return embed_server.main(argv)


COMMANDS = {"serve": serve, "reembed": reembed_command, **human.COMMANDS}


def main(argv: list[str] | None = None) -> int:
    """Entry point of `cpersona` / `python -m cpersona`; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "embed-server":
        return _embed_server(argv[1:])
    parser = argparse.ArgumentParser(
        prog="cpersona", description="Persistent memory for LLM agents over MCP.",
        epilog="Also: `cpersona embed-server [--model use|e5] [--port 8401]` serves the bundled embedding "
        "model over HTTP (see `cpersona embed-server --help`).",
    )
    parser.add_argument("--version", action="version", version=f"cpersona {__version__}")
    parser.add_argument("command", nargs="?", default="serve", choices=list(COMMANDS), help="what to run (default: serve)")
    parser.add_argument("--all", action="store_true", help="reembed: re-embed every row, not only stale ones")
    parser.add_argument("--batch", type=int, default=32, help="reembed: texts per embedding call (1..100)")
    human.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
        _setup_logging(settings.log_level)
        _limit_math_threads(settings.embedding_threads)
        return COMMANDS[args.command](settings, args)
    except (ConfigError, SchemaTooNew) as err:
        print(f"cpersona: {err}", file=sys.stderr)
        return 2
    except (sqlite3.DatabaseError, OSError) as err:
        print(f"cpersona: cannot open the database ({settings.db_path}): {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
