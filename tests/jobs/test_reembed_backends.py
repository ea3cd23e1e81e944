"""The background re-embedding on both storage backends: the server's start after a model
change queues it once (`tasks.enqueue_reembed`) and it replaces every stored vector
(jobs/reembed.py through the task queue)."""

from __future__ import annotations

from cpersona.config import Settings
from cpersona.service.engine import Engine

from conftest import wait_until
from quality_helpers import HashEmbedder, store_all


class Hash384(HashEmbedder):
    """Another model of another dimension."""

    dim = 384


def engine(where: dict[str, str], embedder: HashEmbedder, start: bool = True) -> Engine:
    settings = Settings.from_env({}, **where, calibrate_on_model_change=False, task_retry_delay=0.2)
    return Engine(settings, embedder=embedder, start_background=start)


def test_a_model_change_is_re_embedded_in_the_background(where):
    old = engine(where, HashEmbedder("model-a"))
    store_all(old, [f"note {i} about the harbour ferries and tides" for i in range(30)])
    old.close()
    new = engine(where, Hash384("model-b"), start=False)
    try:
        assert new._prepare_identity() is True  # what the queue worker runs first at start
        assert new._prepare_identity() is True  # a second decision queues no second task
        status = new.queue_status()
        assert status["pending"] == 1 and status["reembed"]["remaining"] == 30
        new.start_background()
        assert wait_until(lambda: new.queue_status()["pending"] == 0, timeout=60)
        assert "reembed" not in new.queue_status() and new.stats()["awaiting_reembed"] == 0
        with new.db.read() as s:
            assert s.vectors.census() == {384: 30}
    finally:
        new.close()
