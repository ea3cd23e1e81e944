"""The vector scan split over two threads (cpersona/index/scan.py) gives every row the score
one pass gives, bit for bit, whatever the helper thread is doing."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from cpersona.index import scan
from cpersona.index.vector_index import VectorIndex
from cpersona.storage.scope import Scope
from threadpoolctl import threadpool_limits


def _unit_rows(rng: np.random.Generator, rows: int, dim: int = 512) -> np.ndarray:
    m = rng.standard_normal((rows, dim), dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@pytest.fixture
def one_blas_thread():
    """The server's BLAS (cli/commands.py caps it at CPERSONA_EMBEDDING_THREADS, default 1)."""
    with threadpool_limits(limits=1, user_api="blas"):
        assert scan.blas_threads() == 1
        yield


@pytest.mark.parametrize("rows", [scan.SPLIT_FROM_ROWS, 4097, 9138, 10_000, 12_345])
def test_a_split_scan_scores_every_row_as_one_pass(rows, one_blas_thread):
    rng = np.random.default_rng(rows)
    matrix = _unit_rows(rng, rows)
    assert scan.split_point(rows) > 0
    for _ in range(5):
        query = _unit_rows(rng, 1)[0]
        assert np.array_equal(scan.matvec(matrix, query), matrix @ query)


def test_a_row_slice_of_a_larger_matrix_scores_as_one_pass(one_blas_thread):
    rng = np.random.default_rng(7)
    matrix = _unit_rows(rng, 11_000)
    query = _unit_rows(rng, 1)[0]
    part = matrix[1_000:10_800]  # a partition's scan window: a view starting mid-matrix
    assert np.array_equal(scan.matvec(part, query), part @ query)


def test_a_threaded_blas_scans_in_one_pass():
    with threadpool_limits(limits=2, user_api="blas"):
        threads = scan.blas_threads()
        assert scan.split_point(10_000, cpus=2) == (0 if threads != 1 else 4992)


@pytest.mark.parametrize(("rows", "cpus", "blas", "expected"), [
    (scan.SPLIT_FROM_ROWS - 1, 2, 1, 0),  # small: one pass
    (10_000, 1, 1, 0),                    # one CPU: nothing to share
    (10_000, 2, 2, 0),                    # BLAS threads of its own already share the pass
    (10_000, 2, 1, 4992),                 # below half, on a multiple of ALIGN
    (scan.SPLIT_FROM_ROWS, 2, 1, 2048),
])
def test_the_split_point_is_aligned_and_only_where_it_pays(rows, cpus, blas, expected):
    half = scan.split_point(rows, cpus, blas)
    assert half == expected
    if half:
        assert half % scan.ALIGN == 0 and half >= scan.ALIGN and rows - half >= scan.ALIGN


def test_a_busy_helper_does_not_hold_the_scan(monkeypatch, one_blas_thread):
    """The helper busy with another recall's half: the caller scores both halves itself."""
    monkeypatch.setattr(scan, "split_point", lambda rows: (rows // 2) // scan.ALIGN * scan.ALIGN)
    release = threading.Event()
    blocker = scan._pool().submit(release.wait, 30)
    try:
        rng = np.random.default_rng(3)
        matrix = _unit_rows(rng, 8_192)
        query = _unit_rows(rng, 1)[0]
        done = []
        worker = threading.Thread(target=lambda: done.append(scan.matvec(matrix, query)))
        worker.start()
        worker.join(10)
        assert done, "the scan waited for the busy helper"
        assert np.array_equal(done[0], matrix @ query)
    finally:
        release.set()
        blocker.result(10)


def test_the_vector_retriever_ranks_a_large_window_as_before(one_blas_thread):
    """End to end through VectorIndex.search: the best rows of a 9,000-row agent, in order."""
    rng = np.random.default_rng(11)
    vectors = _unit_rows(rng, 9_000, dim=64)
    index = VectorIndex(64)
    for i, vec in enumerate(vectors, start=1):
        index.add(i, "a", "", "", f"2026-01-01T00:00:{i % 60:02d}.{i:06d}+00:00", vec)
    query = vectors[4_321] + 0.1 * _unit_rows(rng, 1, dim=64)[0]
    query = (query / np.linalg.norm(query)).astype(np.float32)
    hits = index.search(query, Scope("a"), 10_000, -1.0, 10)
    expected = np.argsort(-(vectors @ query), kind="stable")[:10] + 1
    assert [row_id for row_id, _ in hits] == expected.tolist()
    assert hits[0][0] == 4_322


def test_other_dtypes_are_scored_in_one_pass(one_blas_thread):
    rng = np.random.default_rng(5)
    matrix = _unit_rows(rng, 8_192)
    query = _unit_rows(rng, 1)[0].astype(np.float64)
    scores = scan.matvec(matrix, query)
    assert scores.dtype == np.float64 and np.array_equal(scores, matrix @ query)
