"""The `cpersona` command and its subcommands; each subcommand module registers its own
flags and --help (`add_parser`) and runs with the resolved settings.

    cpersona [serve]         serve MCP (stdio by default; CPERSONA_TRANSPORT=streamable-http)
    cpersona embed-server    HTTP /embed server with the bundled model (own flags)
    cpersona reembed         re-embed stored rows after an embedding-model change
    cpersona stats | list | recall "query" | store "text"   for people (tables)
    cpersona migrate         copy the store between SQLite and PostgreSQL (verified)

Exit codes: 0 success, 1 the command could not do what was asked, 2 bad configuration or
an unusable database (one line on stderr, never a traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import sys

from cpersona import __version__
from cpersona.cli import human, migrate, reembed, serve
from cpersona.config import Settings
from cpersona.errors import ConfigError, StorageError

#: Subcommand modules, each with `add_parser(subparsers)` setting `func(settings, args) -> int`.
COMMANDS = (serve, reembed, human, migrate)
EMBED_SERVER = "embed-server"


def _setup_logging(level: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=level.upper(), format="cpersona %(levelname)s %(name)s: %(message)s")


def _limit_math_threads(threads: int) -> None:
    """Cap BLAS/OpenMP threads (CPERSONA_EMBEDDING_THREADS, default 1): the server shares
    the CPU with its host, and an oversubscribed BLAS pool makes one embedding 20× slower
    on a busy machine."""
    import numpy  # noqa: F401 — load numpy's BLAS first: threadpoolctl limits loaded libraries only
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)


def build_parser() -> argparse.ArgumentParser:
    """The `cpersona` parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="cpersona", description="Persistent memory for LLM agents over MCP.")
    parser.add_argument("--version", action="version", version=f"cpersona {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="command",
                                help="what to run (default: serve); `cpersona <command> --help` for its flags")
    for module in COMMANDS:
        module.add_parser(sub)
    sub.add_parser(EMBED_SERVER,
                   help="serve the bundled embedding model over HTTP (see `cpersona embed-server --help`)",
                   add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `cpersona` / `python -m cpersona`; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == EMBED_SERVER:
        from cpersona.cli import embed_server

        return embed_server.main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command is None:
        args = build_parser().parse_args(["serve", *argv])
    settings: Settings | None = None
    try:
        settings = Settings.from_env()
        _setup_logging(settings.log_level)
        _limit_math_threads(settings.embedding_threads)
        return int(args.func(settings, args))
    except (ConfigError, StorageError) as err:
        print(f"cpersona: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        where = settings.db_path if settings is not None else "?"
        print(f"cpersona: cannot open the database ({where}): {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
