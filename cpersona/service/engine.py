"""`Engine`: the composition root. It builds the layers below — database, embedding
gateway, resident indexes, task queue, calibration, operating context — wires their narrow
collaborators together, and exposes every tool's behaviour through the service mixins:

    writes.py   store, archive_episode, update_memory        (the one write step)
    recall.py   recall, recall_with_context, get_contents
    listing.py  list_memories, list_episodes
    admin.py    delete / lock / unlock, delete_agent_data, profiles, pause, queue, stats
    quality.py  calibrate_threshold, set_recall_precision, get_recall_precision

The MCP tools (cpersona/mcp/tools/) and the CLI (cpersona/cli/) call these methods and only
serialise what they return. Thread-safety: every public method may be called from any
thread; network I/O (embedding) never happens while the write lock is held.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from cpersona.calibration.runner import Calibration
from cpersona.config import Settings
from cpersona.embedding.advisory import Advisory
from cpersona.embedding.base import Embedder
from cpersona.embedding.cache import QueryCache
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.embedding.provider import build_embedder
from cpersona.index.resident import ResidentIndexes
from cpersona.jobs.task_queue import TaskQueue
from cpersona.policy.pause import Pause
from cpersona.policy.projects import OperatingContext
from cpersona.service.admin import AdminService
from cpersona.service.listing import ListingService
from cpersona.service.quality import QualityService
from cpersona.service.recall import PoolCounts, RecallService
from cpersona.service.writes import WriteService
from cpersona.storage.backend import open_database

_UNSET: object = object()


class _IndexAccess:
    """The resident indexes as calibration sees them (calibration.ports.IndexAccess)."""

    def __init__(self, engine: Engine) -> None:
        self.lock = engine.resident.lock
        self.current = engine.indexes


class Engine(WriteService, RecallService, ListingService, AdminService, QualityService):
    """The memory server's service layer over one database.

    Args:
        settings: resolved configuration (`Settings.from_env()`).
        embedder: backend to use; default builds one from settings (None = mode none).
        start_background: start model loading, the task queue worker and the startup
            calibration now; the MCP server passes False and calls `start_background()`
            once `initialize` is answered, so loading a model never delays the handshake.

    Raises:
        ConfigError: the configured embedding backend cannot be built.
        SchemaTooNew: the database file was written by a newer cpersona.
    """

    def __init__(self, settings: Settings, embedder: Embedder | object | None = _UNSET,
                 start_background: bool = True) -> None:
        self.settings = settings
        backend = build_embedder(settings) if embedder is _UNSET else embedder
        self.db = open_database(settings)
        self.pause = Pause()
        self.gateway = EmbeddingGateway(backend, self.db, Advisory(settings.degraded_advisory),  # type: ignore[arg-type]
                                        QueryCache(settings.embedding_cache_size, settings.embedding_cache_ttl))
        self.resident = ResidentIndexes(self.db)
        self.queue = TaskQueue(settings, self.db, self.pause, self.gateway, self.resident, self.refresh_if_changed)
        self.gateway.on_recovered = self.queue.wake  # rows queued while the backend was away can be embedded now
        self.gateway.on_identity = self.resident.invalidate
        self.operating_context = OperatingContext.from_settings(settings)
        self.calibration = Calibration(settings, self.db, self.gateway, _IndexAccess(self), self.pause)
        self._query_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cpersona-query-embed")
        self._pool_counts = PoolCounts()
        self._started = False
        if start_background:
            self.start_background()

    @property
    def embedder(self) -> Embedder | None:
        """The embedding backend (None = mode none)."""
        return self.gateway.embedder

    @property
    def advisory(self) -> Advisory:
        return self.gateway.advisory

    def start_background(self) -> None:
        """Start loading the embedding model, the task queue worker and the startup
        calibration. Idempotent."""
        if self._started:
            return
        self._started = True
        start = getattr(self.embedder, "start", None)
        if start is not None:
            start()
        if self.settings.task_queue_enabled:
            self.queue.start()
        self.calibration.start()

    def close(self) -> None:
        """Stop background work and close the database and backend. Idempotent."""
        self.queue.stop()
        self.calibration.stop()
        self._query_pool.shutdown(wait=True)
        self.gateway.close()
        self.db.close()
