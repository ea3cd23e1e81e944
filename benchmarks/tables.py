"""Plain-text tables of the benchmarks' reports (re-exported by `common.py`)."""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from typing import Any


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.{digits}f}"
    return str(value)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], file=None) -> None:
    """Aligned plain-text table (first column left-aligned, the rest right-aligned)."""
    cells = [list(map(str, headers))] + [[fmt(c) if not isinstance(c, str) else c for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = file or sys.stdout
    for n, row in enumerate(cells):
        line = "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        print(line.rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)


def ms(value: float | None) -> str:
    """Milliseconds for tables: 2 decimals below 10 ms, 1 above."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"
