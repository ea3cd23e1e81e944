"""What every CLI command shares: opening the database, waiting for the bundled model,
printing (a rich table for people, `--json` for scripts) and the exit codes.

Exit codes of every command: 0 done; 1 the command ran but could not do what was asked
(not found, locked, refused, rejected); 2 bad usage, configuration or database (one line on
stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, Literal, overload

from cpersona.config import Settings

if TYPE_CHECKING:  # imported when a command runs, so `cpersona serve` starts without rich
    from rich.console import Console

    from cpersona.embedding.base import Embedder
    from cpersona.service.engine import Engine

OK, FAILED, USAGE = 0, 1, 2
#: Seconds a command waits for the bundled model to load before going keyword-only.
MODEL_WAIT_SECS = 120
PREVIEW = 100


def console() -> Console:
    """A rich console for stdout. A reader that closed the pipe (`| head`) is reported to
    `cli.commands` as the BrokenPipeError it is — rich's own handler exits with status 1, which a
    script under `set -o pipefail` cannot tell from a failure (main exits 141 quietly)."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return PipeConsole(highlight=False, soft_wrap=False)


def table(*args: Any, **kwargs: Any):
    from rich.table import Table

    return Table(*args, **kwargs)


def positive_int(text: str, most: int | None = None) -> int:
    """argparse type: an integer ≥ 1 (a listing or recall of 0 rows shows nothing, which reads
    as an empty store), at most `most` when given."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1 or (most is not None and value > most):
        bounds = f"between 1 and {most}" if most is not None else "at least 1"
        raise argparse.ArgumentTypeError(f"must be {bounds}, got {value}")
    return value


def fail(message: str, code: int = FAILED) -> int:
    """Print `cpersona: message` on stderr; returns `code`."""
    print(f"cpersona: {message}", file=sys.stderr)
    return code


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the answer as JSON (for scripts)")


def print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


@overload
def open_engine(settings: Settings, must_exist: Literal[False]) -> Engine: ...


@overload
def open_engine(settings: Settings, must_exist: bool = True) -> Engine | None: ...


def open_engine(settings: Settings, must_exist: bool = True) -> Engine | None:
    """An Engine without background work (the server runs the queue) that never changes
    the database's recorded embedding model, or None when the file does not exist and
    reading it was asked for."""
    from cpersona.service.engine import Engine

    path = settings.db_file
    if must_exist and not settings.db_url and path is not None and not path.exists():
        return None
    return Engine(settings, start_background=False, model_authority=False)


def missing(settings: Settings) -> int:
    return fail(f"no database at {settings.db_file} (set CPERSONA_DB_PATH to the server's file)")


def wait_for_model(engine: Engine, quiet: bool) -> None:
    """Wait (with a spinner unless `quiet`) for a bundled model that is still loading."""
    embedder = engine.embedder
    if embedder is None or getattr(embedder, "wait_ready", None) is None or embedder.ready():
        return
    if quiet:
        engine.gateway.wait_for_backend(MODEL_WAIT_SECS)
        return
    with console().status("loading the embedding model…"):
        engine.gateway.wait_for_backend(MODEL_WAIT_SECS)


def short(text: str, n: int = PREVIEW) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def agent_label(agent: str) -> str:
    return "''" if agent == "" else agent


def backend_label(embedder: Embedder | None) -> str:
    """The embedding backend for people (embedding/base.py: describe)."""
    from cpersona.embedding.base import describe

    return describe(embedder)
