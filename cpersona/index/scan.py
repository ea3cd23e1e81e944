"""The vector retriever's matrix–vector product, split over two threads on a large scan window.

At 10k rows of 512 dimensions a recall's scan reads 18.7 MB of vectors, more than the CPU's
last-level cache holds: one BLAS thread is memory-bound.
`matvec` gives the first half of the rows to a helper thread and scores the second half on the
caller's thread, so both CPUs pull from memory at once (numpy releases the GIL in BLAS;
measured: benchmarks/rounds/2026-12-02-round-13-vector-scan.md).

The split never changes a score: it falls on a multiple of `ALIGN` rows and each half keeps at
least `ALIGN` rows, so a single-threaded OpenBLAS groups the rows of every half as it groups
them in one pass (checked bit for bit in tests/index/test_scan.py). It is made only while the
BLAS library runs one thread — the server's default (`CPERSONA_EMBEDDING_THREADS` = 1, applied
at start by cli/commands.py): a BLAS running threads of its own already spreads one pass over the
CPUs, by its own partition. When the helper is busy with another recall's half, the caller
takes its half back and scores it itself: a scan never waits behind another.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from typing import Any

import numpy as np

from cpersona.util.threads import CPUS

#: Rows from which a scan is split in two: below it one BLAS pass is as fast as the hand-off.
SPLIT_FROM_ROWS = 4096
#: A split falls on a multiple of this many rows (the row blocking of OpenBLAS's gemv kernels
#: is ≤ 16; 64 keeps every half's grouping equal to one pass's).
ALIGN = 64

_helper: ThreadPoolExecutor | None = None
_helper_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _helper
    with _helper_lock:
        if _helper is None:
            _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cpersona-vector-scan")
        return _helper


@lru_cache(maxsize=1)
def _blas_libraries() -> tuple[Any, ...]:
    """threadpoolctl's controllers of the BLAS libraries numpy loaded (found once: ~1 ms)."""
    from threadpoolctl import ThreadpoolController

    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


def blas_threads() -> int:
    """Threads the BLAS library runs now (asked each time, ~5 µs: a `threadpool_limits`
    block may change it); 1 when no BLAS library is known."""
    return max((lib.get_num_threads() or 1 for lib in _blas_libraries()), default=1)


def split_point(rows: int, cpus: int = CPUS, blas: int | None = None) -> int:
    """Where a scan of `rows` rows is split (0: not split): the multiple of ALIGN nearest
    below half, when there are two CPUs or more, at least SPLIT_FROM_ROWS rows and a
    single-threaded BLAS (`blas`: its thread count, asked when None)."""
    if cpus < 2 or rows < SPLIT_FROM_ROWS or (blas if blas is not None else blas_threads()) != 1:
        return 0
    return (rows // 2) // ALIGN * ALIGN


def matvec(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` as float32, shape (rows,): each row's dot product with `query`.

    Args:
        matrix: (rows, dim) float32, C-contiguous rows (a row slice of a partition); any
            other layout or dtype is scored in one pass.
        query: (dim,) float32 (another dtype: one pass).

    Returns:
        A new (rows,) float32 array, equal bit for bit to ``matrix @ query``.

    Raises:
        ValueError: shapes that do not multiply (as ``matrix @ query``).
    """
    rows = matrix.shape[0]
    plain = matrix.dtype != np.float32 or query.dtype != np.float32 or not matrix.flags.c_contiguous
    half = 0 if plain else split_point(rows)
    if not half:
        return matrix @ query
    out = np.empty(rows, np.float32)
    first: Future = _pool().submit(np.matmul, matrix[:half], query, out=out[:half])
    np.matmul(matrix[half:], query, out=out[half:])
    if first.cancel():  # the helper had not started it (busy with another scan): do it here
        np.matmul(matrix[:half], query, out=out[:half])
    else:
        first.result()
    return out
