"""Whose turn the bundled model is (cpersona.embedding.turns): a batch reaches the model in
slices, and a single text (a recall's query) waiting meanwhile goes before the next slice;
a text too long for the model's memory is embedded by its opening."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from cpersona.embedding import turns
from cpersona.embedding.local import MODELS, LocalEmbedder, ModelSpec

from conftest import wait_until


@pytest.mark.parametrize(("lengths", "limit", "runs"), [
    ([], 10, []),
    ([3, 3, 3], 10, [[3, 3, 3]]),
    ([4, 4, 4], 10, [[4, 4], [4]]),
    ([25, 2, 2], 10, [[25], [2, 2]]),  # a text longer than the limit is a run of its own
    ([2, 25, 2], 10, [[2], [25], [2]]),
    ([10, 10], 10, [[10], [10]]),
])
def test_slices_keep_order_and_bound_each_run(lengths, limit, runs):
    texts = ["x" * n for n in lengths]
    got = list(turns.slices(texts, limit))
    assert [[len(t) for t in run] for run in got] == runs
    assert [t for run in got for t in run] == texts


def test_an_urgent_caller_overtakes_waiting_batch_slices():
    model = turns.ModelTurns()
    order: list[str] = []
    holding = threading.Event()
    release = threading.Event()

    def batch_slice(name: str, first: bool = False) -> None:
        with model.turn(urgent=False):
            order.append(name)
            if first:
                holding.set()
                release.wait(10)

    first = threading.Thread(target=batch_slice, args=("slice-1", True))
    first.start()
    assert holding.wait(10)
    waiting = [threading.Thread(target=batch_slice, args=(f"slice-{i}",)) for i in (2, 3)]
    for t in waiting:
        t.start()
    def urgent() -> None:
        with model.turn(urgent=True):
            order.append("query")

    query = threading.Thread(target=urgent)
    query.start()
    assert wait_until(lambda: model._urgent_waiting == 1)
    time.sleep(0.05)  # the batch slices are waiting too
    release.set()
    for t in (first, *waiting, query):
        t.join(10)
    assert order[:2] == ["slice-1", "query"] and sorted(order[2:]) == ["slice-2", "slice-3"]


def test_a_query_is_embedded_between_two_slices_of_a_batch(monkeypatch):
    calls: list[int] = []
    in_first = threading.Event()
    release = threading.Event()

    def encode(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        if len(calls) == 1:
            in_first.set()
            release.wait(10)
        rows = np.ones((len(texts), 4), dtype=np.float32)
        return rows / 2.0

    monkeypatch.setitem(MODELS, "sliced", ModelSpec("sliced", "numpy", "numpy", "fake", 4, "embed",
                                                    lambda threads: encode))
    emb = LocalEmbedder("sliced", background=False)
    batch = ["y" * 400] * 6  # 2,400 characters: three slices of two texts
    result: list[np.ndarray] = []
    worker = threading.Thread(target=lambda: result.append(emb.embed(batch)))
    worker.start()
    assert in_first.wait(10)
    query_result: list[np.ndarray] = []
    query = threading.Thread(target=lambda: query_result.append(emb.embed(["the query"])))
    query.start()
    assert wait_until(lambda: emb._turns._urgent_waiting == 1)
    release.set()
    worker.join(10)
    query.join(10)
    assert calls == [2, 1, 2, 2]  # first slice, the query, the rest of the batch
    assert result[0].shape == (6, 4) and query_result[0].shape == (1, 4)
    emb.close()


def test_a_text_longer_than_the_cap_is_embedded_by_its_opening(monkeypatch):
    from cpersona.embedding import local

    seen: list[int] = []

    def encode(texts: list[str]) -> np.ndarray:
        seen.extend(len(t) for t in texts)
        return np.full((len(texts), 4), 0.5, dtype=np.float32)

    monkeypatch.setitem(MODELS, "capped", ModelSpec("capped", "numpy", "numpy", "fake", 4, "embed",
                                                    lambda threads: encode))
    emb = LocalEmbedder("capped", background=False)
    emb.embed(["z" * (local.EMBED_MAX_CHARS * 3), "short"])
    assert seen == [local.EMBED_MAX_CHARS, 5]
    emb.close()
