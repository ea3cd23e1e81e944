"""`Engine`: the composition root. It builds the layers below — database, embedding
gateway, resident indexes, task queue, calibration, operating context — wires their narrow
collaborators together, and exposes every tool's behaviour through the service mixins:

    writes.py   store, archive_episode, update_memory        (the one write step)
    recall.py   recall, recall_with_context, get_contents
    listing.py  list_memories, list_episodes
    admin.py    delete / lock / unlock, delete_agent_data, profiles, pause, queue, stats
                (identity.py: the embedding model's identity at start and in stats)
    quality.py  calibrate_threshold, set_recall_precision, get_recall_precision
    updates.py  check_update, the update notice of status answers
    health.py   check_health, deep_check, the integrity check at start
    exporting.py, importing.py, merging.py   export / import / merge_memories,
                migrate_channel_axis (large writes journaled by bulkwrite.py)

`backups.py` (backup / restore) works on the files named by the settings, not on an Engine.

The MCP tools (cpersona/mcp/tools/) and the CLI (cpersona/cli/) call these methods and only
serialise what they return. Thread-safety: every public method may be called from any
thread; network I/O (embedding) never happens while the write lock is held.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from cpersona.calibration.runner import Calibration
from cpersona.config import Settings
from cpersona.embedding.advisory import Advisory
from cpersona.embedding.base import Embedder
from cpersona.embedding.cache import QueryCache
from cpersona.embedding.gateway import EmbeddingGateway
from cpersona.embedding.provider import build_embedder
from cpersona.errors import StorageUnavailable
from cpersona.index import token_sets
from cpersona.index.resident import ResidentIndexes
from cpersona.jobs.task_queue import TaskQueue
from cpersona.policy.pause import Pause
from cpersona.policy.projects import OperatingContext
from cpersona.service import bulkwrite
from cpersona.service.admin import AdminService
from cpersona.service.health import HealthService
from cpersona.service.listing import ListingService
from cpersona.service.merging import MergeService
from cpersona.service.prefetch import QueryPrefetch
from cpersona.service.quality import QualityService
from cpersona.service.recall import PoolCounts, RecallService
from cpersona.service.updates import UpdateService
from cpersona.service.writes import WriteService
from cpersona.storage.backend import open_database
from cpersona.updates.checker import UpdateCheck

_UNSET: object = object()
log = logging.getLogger(__name__)


class _IndexAccess:
    """The resident indexes as calibration sees them (calibration.ports.IndexAccess)."""

    def __init__(self, engine: Engine) -> None:
        self.lock = engine.resident.lock
        self.current = engine.indexes


class Engine(WriteService, RecallService, ListingService, AdminService, QualityService, UpdateService,
             HealthService, MergeService):
    """The memory server's service layer over one database.

    Args:
        settings: resolved configuration (`Settings.from_env()`).
        embedder: backend to use; default builds one from settings (None = mode none).
        start_background: start model loading, the task queue worker and the startup
            calibration now (all in background threads: the MCP server does so at process
            start, so the model loads while the handshake is answered); CLI commands pass
            False (the server runs the queue).
        model_authority: this process may change the database's recorded embedding model
            (the server, `cpersona reembed`); False for every other command, which reports
            a mismatch and searches by keyword instead (service/identity.py).

    Raises:
        ConfigError: the configured embedding backend cannot be built.
        SchemaTooNew: the database file was written by a newer cpersona.
        StorageError: the file cannot be opened at all (a damaged file that can still be
            read is served read-only; `damage` says why).
    """

    def __init__(self, settings: Settings, embedder: Embedder | object | None = _UNSET,
                 start_background: bool = True, model_authority: bool = True) -> None:
        self.settings = settings
        backend = build_embedder(settings) if embedder is _UNSET else embedder
        self.db, self.damage = open_database(settings)
        self.pause = Pause()
        self.gateway = EmbeddingGateway(backend, self.db, Advisory(settings.degraded_advisory),  # type: ignore[arg-type]
                                        QueryCache(settings.embedding_cache_size, settings.embedding_cache_ttl),
                                        authority=model_authority)
        self.resident = ResidentIndexes(self.db)
        self.queue = TaskQueue(settings, self.db, self.pause, self.gateway, self.resident, self.refresh_if_changed,
                               prepare=self._prepare_identity)
        self.gateway.on_recovered = self.queue.wake  # rows queued while the backend was away can be embedded now
        self.gateway.on_identity = self._identity_decided
        if self.db.fts_problem:  # the full-text index is unusable here: every recall says so
            self.gateway.advisory.set_keyword_problem(f"SQLite {self.db.sqlite_version}: {self.db.fts_problem}")
        self.operating_context = OperatingContext.from_settings(settings)
        self.calibration = Calibration(settings, self.db, self.gateway, _IndexAccess(self), self.pause)
        self._query_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cpersona-query-embed")
        self._prefetch = QueryPrefetch()
        #: the embeddings of writes, apart from the queries' (which must not queue behind a burst of stores)
        self._write_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="cpersona-write-embed")
        #: a recall's other read connections (the word index's MATCH and the vector retriever
        #: beside the trigram MATCH), two per recall
        self._read_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cpersona-recall-read")
        self._pool_counts = PoolCounts()
        self._started = False
        self._closing = threading.Event()
        self._token_fill: threading.Thread | None = None
        # Built idle: the server starts it once per process (cli/serve.py); tools and the CLI never fetch.
        self.updates = UpdateCheck(settings)
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
        """Start loading the embedding model, tokenising the stored texts for recall's word
        coverage (index/token_sets.py), the task queue worker, the startup calibration and
        the integrity check (a read-only file runs neither queue nor calibration: they
        write). Idempotent."""
        if self._started:
            return
        self._started = True
        start = getattr(self.embedder, "start", None)
        if start is not None:
            start()
        self._token_fill = threading.Thread(target=self._fill_token_sets, name="cpersona-token-sets", daemon=True)
        self._token_fill.start()
        if self.settings.task_queue_enabled and not self.db.read_only:
            self.queue.start()
        if not self.db.read_only:
            self.calibration.start()
            with self.db.read() as s:
                interrupted = bool(s.journal.ops())
            if interrupted:
                threading.Thread(target=self._recover_bulk_writes, name="cpersona-bulk-recovery", daemon=True).start()
        if self.settings.startup_integrity_check and not self.db.memory:
            self.start_integrity_watch()

    def _fill_token_sets(self) -> None:
        """Tokenise every stored memory ahead of recall (index/token_sets.py); stops at close."""
        try:
            token_sets.fill_from(self.db, self._closing)
        except StorageUnavailable as err:  # storage/failures.py has logged the condition; recalls report it
            log.debug("tokenising the stored texts stopped: %s", err)
        except Exception:
            if self._closing.is_set():
                log.debug("tokenising the stored texts stopped by close", exc_info=True)
            else:
                log.exception("tokenising the stored texts ahead of recall failed; "
                              "recall tokenises rows as it meets them")

    def _recover_bulk_writes(self) -> None:
        """Undo (or finish) the imports and merges a killed process left half done."""
        try:
            bulkwrite.recover(self.db, self._forget_rows)
        except Exception:
            log.exception("recovering interrupted imports / merges failed; the next bulk write retries")

    def close(self) -> None:
        """Stop background work and close the database and backend. Idempotent. The backend
        closes first: an embedding in flight (a worker stopped mid-batch) then fails at once
        instead of holding the threads joined here until its watchdog fires (~15 s)."""
        self._closing.set()
        if self._token_fill is not None:
            self._token_fill.join()  # it reads the database: done before the database closes
        self.gateway.close()
        self.queue.stop()
        self.calibration.stop()
        self.stop_integrity_watch()
        self._query_pool.shutdown(wait=True)
        self._write_pool.shutdown(wait=True)
        self._read_pool.shutdown(wait=True)
        self.db.close()
