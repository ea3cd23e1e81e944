"""The body of get_queue_status: the worker's state, the pending and failed tasks, and the
background re-embedding's progress after a model change."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from cpersona.config import Settings
from cpersona.embedding import identity
from cpersona.jobs.ports import Embeddings
from cpersona.storage import Database


class Queue(Protocol):
    """What the status reads of the queue (jobs/task_queue.py: `TaskQueue`)."""

    settings: Settings
    db: Database
    embeddings: Embeddings
    clock: Callable[[], float]
    state: str
    waiting_reason: str | None

    @property
    def enabled(self) -> bool: ...

    @property
    def delay(self) -> float: ...

    @property
    def max_retries(self) -> int: ...

    def running(self) -> bool: ...


def queue_status(queue: Queue) -> dict[str, Any]:
    """{enabled, running, state, pending, failed, retrying, retries, max_retries, retry_delay,
    oldest_pending_age_s, waiting_reason?, embedding_worker?, recent_failures?, reembed?}.

    `retries` = sum of the failed attempts of the pending tasks; `retrying` = how many
    pending tasks failed at least once; `failed` = tasks given up (kept with their error);
    `reembed` = {from_model, from_dim, to_model, to_dim, total, done, remaining} while rows
    still hold vectors of a previous model; `embedding_worker` = a worker process that is not
    answering (`_stalled_worker`), which `waiting_reason` then names.
    """
    with queue.db.read() as s:
        summary = s.tasks.summary()
        reembed = identity.progress(s, s.meta.vector_state())
    running = queue.running()
    out: dict[str, Any] = {
        "enabled": queue.enabled,
        "running": running,
        "state": queue.state if running else "stopped",
        "pending": summary["pending"],
        "failed": summary["failed"],
        "retrying": summary["retrying"],
        "retries": summary["retries"],
        "max_retries": queue.max_retries,
        "retry_delay": queue.delay,
        "oldest_pending_age_s": _age_seconds(summary["oldest"], queue.clock()),
    }
    if queue.waiting_reason and running:
        out["waiting_reason"] = queue.waiting_reason
    stalled = _stalled_worker(queue)
    if stalled is not None:
        out["embedding_worker"] = stalled
        if running:
            out["waiting_reason"] = (f"the embedding worker has not answered a batch for {stalled['waited_s']} s "
                                     "(stopped, hung, or one very long text on a busy machine); its watchdog "
                                     f"replaces it after {stalled['replaced_at_s']} s")
    if summary["recent_failures"]:
        out["recent_failures"] = summary["recent_failures"]
    if reembed is not None:
        out["reembed"] = reembed
    return out


def _stalled_worker(queue: Queue) -> dict[str, Any] | None:
    """{state: "not_answering", waited_s, replaced_at_s} when the bundled model's worker process
    has had a batch in flight for longer than CPERSONA_EMBED_WAIT_SECS (what a recall waits for
    its query vector: past it, recalls answer from keywords); else None."""
    busy = queue.embeddings.not_answering(queue.settings.embed_wait_secs)
    if busy is None:
        return None
    return {"state": "not_answering", "waited_s": round(busy[0], 1), "replaced_at_s": round(busy[1], 1)}


def _age_seconds(created_at: str | None, now: float) -> float | None:
    if not created_at:
        return None
    try:
        then = datetime.strptime(created_at, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None
    return round(max(0.0, now - then), 1)
