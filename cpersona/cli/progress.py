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
#: database exits 2 through `cli.main`.
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
