"""What the portability commands (export, import, merge, backup, restore) share: the
engine they open, the progress bar, one-line answers."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from cpersona.config import Settings

if TYPE_CHECKING:
    from cpersona.service.engine import Engine

#: Exit status: done / refused or failed (bad input, aborted) — a bad setting or an unusable
#: database exits 2 through `cli.commands`.
OK, FAILED = 0, 1
Tick = Callable[[str, int, int], None]


def open_engine(settings: Settings, must_exist: bool = True) -> Engine | None:
    """An Engine without background work that never changes the database's recorded
    embedding model (rows it writes are embedded by the server's queue); None when the
    file does not exist and `must_exist`."""
    from cpersona.service.engine import Engine

    path = settings.db_file
    if must_exist and path is not None and not path.exists():
        return None
    return Engine(settings, start_background=False, model_authority=False)


@contextmanager
def bar(label: str, quiet: bool) -> Iterator[Tick]:
    """A rich progress bar on stderr (transient); yields `tick(what, done, total)`. Quiet
    (or stderr not a terminal): ticks are ignored."""
    if quiet or not sys.stderr.isatty():
        yield lambda what, done, total: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(label, total=None)
        yield lambda what, done, total: progress.update(task, completed=done, total=total)


def fail(command: str, message: str) -> int:
    """One line on stderr; exit status FAILED."""
    print(f"cpersona {command}: {message}", file=sys.stderr)
    return FAILED


def answer(command: str, result: dict[str, Any], as_json: bool, summary: Callable[[dict[str, Any]], str]) -> int:
    """Print the result (JSON, or the summary line and any notes); FAILED when not ok."""
    if as_json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
        return OK if result.get("ok", True) else FAILED
    if result.get("ok") is False:
        return fail(command, str(result.get("error")))
    print(summary(result))
    for note in result.get("errors", []):
        print(f"  note: {note}")
    return OK


def run_on_engine(command: str, settings: Settings, as_json: bool, call: Callable[[Engine, Tick], dict[str, Any]],
                  summary: Callable[[dict[str, Any]], str], must_exist: bool = True) -> int:
    """Open the engine, run `call(engine, tick)` under a progress bar, answer (module doc)."""
    from cpersona.errors import InvalidArgument

    engine = open_engine(settings, must_exist)
    if engine is None:
        return fail(command, f"no database at {settings.db_file}")
    try:
        with bar(command, as_json) as tick:
            result = call(engine, tick)
    except InvalidArgument as err:
        return fail(command, str(err))
    finally:
        engine.close()
    return answer(command, result, as_json, summary)


def run_on_files(command: str, as_json: bool, call: Callable[[Tick], dict[str, Any]],
                 summary: Callable[[dict[str, Any]], str]) -> int:
    """Run a command on the files the settings name (backup, restore) under a progress bar."""
    from cpersona.errors import InvalidArgument

    try:
        with bar(command, as_json) as tick:
            result = call(tick)
    except (InvalidArgument, OSError) as err:
        return fail(command, str(err))
    return answer(command, result, as_json, summary)
