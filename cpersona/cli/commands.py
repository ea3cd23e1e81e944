"""The `cpersona` command and its subcommands. Each subcommand module registers its own
flags and --help (`add_parser(subparsers)`, setting `func(settings, args) -> int`) and is
listed once in COMMANDS; a new command is one more module here.

    cpersona [serve]         serve MCP (stdio by default; CPERSONA_TRANSPORT=streamable-http)
    cpersona stats | list | recall "query"                read (tables, or --json)
    cpersona store "text" | update REF "text" | delete REF | lock REF | unlock REF
    cpersona config          the effective settings and where each came from
    cpersona reembed         re-embed stored rows after an embedding-model change
    cpersona proxy           relay MCP from stdio to a remote streamable-HTTP server
    cpersona embed-server    HTTP /embed server with the bundled model (own flags)
    cpersona checkup         check (and with --fix repair) a database file; exit 2 = critical
    cpersona export | import | merge | migrate-channel-axis  move memories between files and agents
    cpersona backup DEST | restore SRC                       the database and its side files
    cpersona migrate --to URL | --from URL                   copy the store between SQLite and PostgreSQL
    cpersona hooks install | uninstall | status              host hooks (`cpersona hook <Event>` runs one)
    cpersona context [--query Q] | forget --session ID       memory for any host; forget a hooked session

Exit codes: 0 success; 1 the command ran but could not do what was asked (not found,
locked, refused); 2 bad usage, configuration or an unusable database (one line on stderr,
never a traceback); 130 interrupted (Ctrl-C) — except `serve`, for which Ctrl-C is the
normal way to stop (0).
"""

from __future__ import annotations

import argparse
import logging
import sys

from cpersona import __version__
from cpersona.cli import (
    backup,
    checkup,
    context,
    export,
    hooks,
    imports,
    merge,
    migrate,
    proxy,
    read,
    reembed,
    serve,
    settings,
    write,
)
from cpersona.cli.common import USAGE, fail
from cpersona.config import Settings
from cpersona.errors import ConfigError, InvalidArgument, StorageError

#: Subcommand modules, each with `add_parser(subparsers)` setting `func(settings, args) -> int`.
COMMANDS = (serve, read, write, settings, reembed, proxy, checkup, export, imports, merge, backup, migrate, hooks,
            context)
EMBED_SERVER = "embed-server"
INTERRUPTED = 130
#: Exit status when the reader of stdout went away (`| head`): 128 + SIGPIPE, as a command
#: killed by the signal reports it, silently.
CLOSED_OUTPUT = 141


def _setup_logging(level: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=level.upper(), format="cpersona %(levelname)s %(name)s: %(message)s")


def _limit_math_threads(threads: int) -> None:
    """Cap BLAS/OpenMP threads (CPERSONA_EMBEDDING_THREADS, default 1): the server shares
    the CPU with its host, and an oversubscribed BLAS pool makes one embedding 20× slower
    on a busy machine."""
    import numpy  # noqa: F401 — load numpy's BLAS first: threadpoolctl limits loaded libraries only
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads)


def _output_closed() -> int:
    """stdout's reader closed the pipe: nothing more can be said there, and it is no error
    of ours. stdout is pointed at os.devnull so the interpreter's final flush stays silent
    (the recipe of Python's `signal` module documentation, "Note on SIGPIPE")."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return CLOSED_OUTPUT


def build_parser() -> argparse.ArgumentParser:
    """The `cpersona` parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="cpersona", description="Persistent memory for LLM agents over MCP.",
                                     epilog="Exit codes: 0 done, 1 refused or not found, 2 bad usage or "
                                            "configuration.")
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
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            args = build_parser().parse_args(["serve", *argv])
    except SystemExit as exc:  # --help / --version (0) or bad usage (2)
        return int(exc.code or 0)
    resolved: Settings | None = None
    try:
        resolved = Settings.from_env()
        _setup_logging(resolved.log_level)
        _limit_math_threads(resolved.embedding_threads)
        if args.command not in ("serve", "config"):  # those two name them in their own output
            from cpersona.cli.settings import unknown_variables

            for note in unknown_variables():
                print(f"cpersona: warning: {note}", file=sys.stderr)
        status = int(args.func(resolved, args))
        sys.stdout.flush()  # a closed pipe is noticed here, not in the interpreter's last flush
        return status
    except (ConfigError, StorageError, InvalidArgument) as err:
        return fail(str(err), USAGE)
    except BrokenPipeError:
        return _output_closed()
    except OSError as err:
        where = resolved.db_path if resolved is not None else "?"
        return fail(f"cannot open the database ({where}): {err}", USAGE)
    except KeyboardInterrupt:
        return INTERRUPTED
