"""Reads a recall repeats, answered once per session.

A recall asks the same small questions of the store several times over one read session (the
memories table's size for each idf and pruning bound, ~5 times; the episode boundary twice).
Each statement is cheap, but each hands the interpreter lock to another thread and waits to
get it back (a recall runs beside its own side jobs; measured with `latency_pair.py`:
benchmarks/rounds/2026-12-02-round-15-token-sets.md). A session is one
`Database.read()` block, so an answer is kept for at most one recall's reads; inside a write
transaction nothing is kept (the session's own writes may change the answer).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


def once(conn: sqlite3.Connection | Any, memo: dict[Hashable, Any], key: Hashable, read: Callable[[], T]) -> T:
    """`memo[key]`, read by `read()` the first time; never kept while `conn` is in a transaction."""
    if key in memo:
        return memo[key]
    value = read()
    if not conn.in_transaction:
        memo[key] = value
    return value
