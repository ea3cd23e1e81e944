"""The resident vector index follows the database: writes reach it in commit order, and a
vector computed before another process switched models is never written.

Both tests are deterministic: the interleaving is forced with events, not hoped for."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from cpersona.devtools.fake_embed import fake_vector

from quality_helpers import HashEmbedder, make

#: Upper bound on how long the first writer waits for the second inside its index change.
#: With commit ordering the second writer cannot commit meanwhile, so the wait always runs out.
HOLD_SECONDS = 1.0


def test_racing_updates_leave_the_committed_vector_in_the_index(tmp_path):
    eng = make(tmp_path / "race.db")
    try:
        mid = eng.store("a", "original text of the row")["id"]
        eng.steps.indexes()  # load the resident index, so updates change it
        first_in_index, second_done = threading.Event(), threading.Event()
        real_add = eng.resident.add

        def slow_first_add(*args):
            if not first_in_index.is_set():
                first_in_index.set()
                second_done.wait(HOLD_SECONDS)  # the second update tries to overtake here
            real_add(*args)

        eng.resident.add = slow_first_add
        first = threading.Thread(target=eng.update_memory, args=(mid, "alpha the ship sails at dawn"))
        first.start()
        assert first_in_index.wait(10)
        assert eng.update_memory(mid, "bravo my tax return is due")["ok"] is True
        second_done.set()
        first.join(10)
        content = sqlite3.connect(eng.settings.db_file).execute("SELECT content FROM memories WHERE id = ?", (mid,)).fetchone()[0]
        assert content == "bravo my tax return is due"  # the second update committed last
        cos = eng.steps.indexes()["memories"].cosines(fake_vector(content), [mid])
        assert cos[mid] == pytest.approx(1.0, abs=1e-5)
    finally:
        eng.close()


class NegatedHash(HashEmbedder):
    """Another model of the same dimension: every vector negated."""

    def embed(self, texts):
        return -super().embed(texts)


def test_a_vector_of_the_old_model_is_not_written_after_another_process_switched(tmp_path):
    db = tmp_path / "two.db"
    old = make(db, embedder=HashEmbedder("model-a"), task_queue_enabled=False)
    try:
        assert old.store("a", "harbor ferries leave at dawn")["embedded"] is True
        new = make(db, embedder=NegatedHash("model-b"), task_queue_enabled=False)
        try:
            new.gateway.reconcile()  # the second process records its model: old rows are stale
            out = old.store("a", "harbor ferries leave at dawn daily")  # embedded with model-a first
            assert out["result"] == "stored" and out["embedded"] is False
            blob = sqlite3.connect(db).execute("SELECT embedding FROM memories WHERE id = ?", (out["id"],)).fetchone()[0]
            assert blob is None  # queued, to be embedded by the process that owns the recorded model
            pending = sqlite3.connect(db).execute("SELECT COUNT(*) FROM pending_memory_tasks").fetchone()[0]
            assert pending == 1  # only the new row: the first one was written with its vector
            assert "another process" in str(old.advisory.payload())
        finally:
            new.close()
    finally:
        old.close()


class Flaky(HashEmbedder):
    """Hashing backend that raises while `down` is set."""

    down = True

    def embed(self, texts):
        from cpersona.embedding.base import EmbeddingError

        if self.down:
            raise EmbeddingError("endpoint down")
        return super().embed(texts)


def test_the_queue_waits_instead_of_spinning_when_another_process_owns_the_model(tmp_path):
    db = tmp_path / "q.db"
    backend = Flaky("model-a")
    backend.down = False
    old = make(db, embedder=backend, task_queue_enabled=False)
    try:
        assert old.store("a", "first row")["embedded"] is True  # records model-a
        backend.down = True
        for i in range(3):
            assert old.store("a", f"queued row {i}")["embedded"] is False
        new = make(db, embedder=NegatedHash("model-b"), task_queue_enabled=False)
        try:
            new.gateway.reconcile()  # the other process records its model
            backend.down = False
            calls = backend.calls
            wait = old.queue.run_once()
            assert wait is not None and wait > 0  # a pause, not "go on now"
            assert old.queue.status()["pending"] == 3 and old.queue.status()["retries"] == 0
            assert backend.calls - calls <= 2  # the batch and one probe, then it waits
            assert new.queue.run_once() in (0, None)  # the owner of the recorded model embeds them
            assert new.queue.status()["pending"] == 0
        finally:
            new.close()
    finally:
        old.close()
