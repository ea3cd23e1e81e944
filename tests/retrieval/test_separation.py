"""The agent's vector separation (neighbours in time vs random pairs) and the cc weight of
the cosine that follows from it (retrieval/separation.py)."""

from __future__ import annotations

import numpy as np
import pytest
from cpersona.index.vector_index import VectorIndex
from cpersona.retrieval import separation

DIM = 16


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _index(rows: list[np.ndarray], agent: str = "a") -> VectorIndex:
    index = VectorIndex(DIM)
    for i, vec in enumerate(rows):
        index.add(i + 1, agent, "", "", f"2025-01-01T00:{i // 60:02d}:{i % 60:02d}Z", _unit(vec))
    return index


def _topics(blocks: int, per_block: int, noise: float, seed: int = 1) -> list[np.ndarray]:
    """Rows in time order, `per_block` consecutive rows on each of `blocks` topics."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(blocks, DIM))
    return [centres[b] + noise * rng.normal(size=DIM) for b in range(blocks) for _ in range(per_block)]


def test_gini_is_one_when_every_neighbour_pair_is_closer_and_zero_for_the_same_distribution():
    assert separation.gini(np.array([0.9, 0.8]), np.array([0.1, 0.2, 0.3])) == pytest.approx(1.0)
    assert separation.gini(np.array([0.1, 0.2]), np.array([0.8, 0.9])) == pytest.approx(-1.0)
    same = np.linspace(0, 1, 11)
    assert separation.gini(same, same) == pytest.approx(0.0)


def test_sessions_on_distinct_topics_separate_and_one_topic_does_not():
    topical = separation.separation(_index(_topics(20, 10, 0.3)), "a")
    one_topic = separation.separation(_index(_topics(1, 200, 0.3)), "a")
    assert topical is not None and topical > 0.8
    assert one_topic is not None and abs(one_topic) < 0.2
    assert separation.cc_alpha(_index(_topics(20, 10, 0.3)), "a", 0.2) == pytest.approx(0.5 * topical**2)
    assert separation.cc_alpha(_index(_topics(1, 200, 0.3)), "a", 0.2) < 0.1


def test_too_few_rows_or_no_index_keep_the_configured_weight():
    small = _index(_topics(2, (separation.MIN_ROWS - 1) // 2, 0.3))
    assert separation.separation(small, "a") is None
    assert separation.cc_alpha(small, "a", 0.2) == 0.2
    assert separation.cc_alpha(None, "a", 0.3) == 0.3
    assert separation.cc_alpha(small, "someone-else", 0.25) == 0.25


def test_the_measurement_is_deterministic_and_follows_the_rows():
    rows = _topics(20, 10, 0.3)
    first, again = separation.separation(_index(rows), "a"), separation.separation(_index(rows), "a")
    assert first == again
    index = _index(rows)
    before = separation.separation(index, "a")
    rng = np.random.default_rng(9)
    for i in range(200):  # rows with no topic structure dilute the separation
        index.add(10_000 + i, "a", "", "", f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z", _unit(rng.normal(size=DIM)))
    after = separation.separation(index, "a")
    assert before is not None and after is not None and after < before


def test_the_measurement_is_redone_only_when_the_agent_grows_by_a_step_or_its_measured_rows_change():
    rows = _topics(20, 10, 0.3)
    newer = ("2026-01-01T00:00:00Z", _unit(rows[0]))
    index = _index(rows)
    first = separation.separation(index, "a")
    assert separation.checkpoint(200) == separation.checkpoint(201) == 194
    index.add(5000, "a", "", "", *newer)  # newer than every measured row, same step
    assert separation.separation(index, "a") == first
    index.remove(1)  # a measured row leaves: measured again, exactly as on a fresh index of these rows
    fresh = _index(rows)
    fresh.remove(1)
    fresh.add(5000, "a", "", "", *newer)
    assert separation.separation(index, "a") == separation.separation(fresh, "a")
