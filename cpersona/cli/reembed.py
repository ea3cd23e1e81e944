"""`cpersona reembed`: re-embed stored rows with the active model, with a progress bar;
resumable (Ctrl-C keeps finished batches)."""

from __future__ import annotations

import argparse
import sys

from cpersona.config import Settings
from cpersona.errors import EmbeddingError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reembed", help="embed rows without a vector; re-embed rows after a model change",
                       description="Re-embed the rows whose vectors came from another model, then embed every row "
                                   "stored without a vector (imported, or written without a model) (resumable).")
    p.add_argument("--all", action="store_true", help="re-embed every row, not only stale ones")
    p.add_argument("--batch", type=int, default=32, help="texts per embedding call (1..100, default 32)")
    p.set_defaults(func=reembed_command)


def reembed_command(settings: Settings, args: argparse.Namespace) -> int:
    """Re-embed stale rows with a progress bar. The run is the only driver in its process:
    no background work is started (the model loads when the run waits for it), since the
    task queue's worker would embed the same rows meanwhile — and rows it embedded before
    the run counted them were reported as "embedded 0 of 0 rows without a vector"."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from cpersona.jobs.reembed import reembed
    from cpersona.service.engine import Engine

    engine = Engine(settings, start_background=False)
    columns = (TextColumn("re-embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    try:
        with Progress(*columns, transient=False) as bar:
            task = bar.add_task("rows", total=None)
            report = reembed(engine.gateway, engine.db, args.batch, args.all,
                             lambda done, total: bar.update(task, completed=done, total=total))
    except EmbeddingError as err:
        print(f"cpersona reembed: {err}", file=sys.stderr)
        return 1
    finally:
        engine.close()
    print(f"re-embedded {report.rows} of {report.total} rows with {report.model} ({report.dim}-d); "
          f"embedded {report.embedded} of {report.missing} rows without a vector")
    return 0
