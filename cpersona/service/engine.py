"""`Engine`: the composition root and the façade of the service layer.

It builds the layers below once — database, embedding gateway, resident indexes, task
queue, calibration, operating context, update check — and the services over them, each a
plain class given its collaborators in its constructor (none of them sees the Engine):

    recall.RecallService      recall, recall_with_context, get_contents, a transport's head start
    writes.WriteService       store, archive_episode, update_memory   (the one write step)
    listing.ListingService    list_memories, list_episodes
    admin.AdminService        delete / lock / unlock, delete_agent_data, profiles
    status.StatusService      pause, queue status, operating context, stats, check_update
    quality.QualityService    calibrate_threshold, set_recall_precision, get_recall_precision
    health.HealthService      check_health, deep_check, the integrity check at start
    exporting / importing / merging   export / import / merge_memories, migrate_channel_axis
    identity.IdentityService  the embedding model's identity at start and in stats
    associations.AssociationService   declare_associations, store's `associations`
    graph.GraphService        traverse, and the graph reads of other services (evidence, supersedes)
    findings.FindingsService  get_session_findings

What they share comes as collaborators too: `steps.Steps` (another process's commits, the
resident indexes, the operating context's project rules) and `placement.Placement` (where
a written row's vector goes).

The Engine owns what is process-wide — the pools that embed queries and writes and run a
recall's read jobs, the query prefetch, the pool-count cache, the background threads (the
services are handed the ones they use) — and their lifecycle (`start_background`, `close`).
Every tool is a method of the same name that delegates to its service (documented there),
so the MCP tools (cpersona/mcp/tools/) and the CLI (cpersona/cli/) call `engine.store(...)`
and only serialise what it returns.
Thread-safety: every public method may be called from any thread; network I/O (embedding)
never happens while the write lock is held.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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
from cpersona.service.associations import AssociationService
from cpersona.service.exporting import ExportService, Progress
from cpersona.service.findings import FindingsService
from cpersona.service.graph import GraphService
from cpersona.service.health import HealthService
from cpersona.service.identity import IdentityService
from cpersona.service.importing import ImportService
from cpersona.service.listing import ListingService
from cpersona.service.merging import MergeService
from cpersona.service.outcomes import (
    AgentErased,
    ArchiveResult,
    Profile,
    ProfileUpdate,
    RecallResult,
    Report,
    RowChange,
    StoreResult,
)
from cpersona.service.placement import Placement
from cpersona.service.prefetch import QueryPrefetch
from cpersona.service.quality import QualityService
from cpersona.service.recall import PoolCounts, RecallService
from cpersona.service.requests import RecallRequest
from cpersona.service.status import StatusService
from cpersona.service.steps import Steps
from cpersona.service.writes import WriteService
from cpersona.storage.backend import open_database
from cpersona.storage.scope import Scope
from cpersona.updates.checker import UpdateCheck

_UNSET: object = object()
log = logging.getLogger(__name__)


class _IndexAccess:
    """The resident indexes as calibration sees them (calibration.ports.IndexAccess)."""

    def __init__(self, resident: ResidentIndexes, steps: Steps) -> None:
        self.lock = resident.lock
        self.current = steps.indexes


class Engine:
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
        self.db, damage = open_database(settings)
        self.pause = Pause()
        self.gateway = EmbeddingGateway(backend, self.db, Advisory(settings.degraded_advisory),  # type: ignore[arg-type]
                                        QueryCache(settings.embedding_cache_size, settings.embedding_cache_ttl),
                                        authority=model_authority)
        self.resident = ResidentIndexes(self.db)
        self.operating_context = OperatingContext.from_settings(settings)
        self.steps = Steps(self.gateway, self.resident, self.operating_context)
        self.queue = TaskQueue(settings, self.db, self.pause, self.gateway, self.resident,
                               self.steps.refresh_if_changed, prepare=self._prepare_identity)
        self.identity = IdentityService(settings, self.db, self.gateway, self.resident, self.queue)
        self.gateway.on_recovered = self.queue.wake  # rows queued while the backend was away can be embedded now
        self.gateway.on_identity = self.identity.decided
        if self.db.fts_problem:  # the full-text index is unusable here: every recall says so
            self.gateway.advisory.set_keyword_problem(f"SQLite {self.db.sqlite_version}: {self.db.fts_problem}")
        self.calibration = Calibration(settings, self.db, self.gateway, _IndexAccess(self.resident, self.steps),
                                       self.pause)
        # Built idle: the server starts it once per process (cli/serve.py); tools and the CLI never fetch.
        self.updates = UpdateCheck(settings)
        self._start_pools()
        self._build_services(damage)
        self._started = False
        self._closing = threading.Event()
        self._token_fill: threading.Thread | None = None
        if start_background:
            self.start_background()

    def _start_pools(self) -> None:
        """The process-wide pools and caches (the services are handed the ones they use)."""
        self._query_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cpersona-query-embed")
        self._prefetch = QueryPrefetch()
        #: the embeddings of writes, apart from the queries' (which must not queue behind a burst of stores)
        self._write_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="cpersona-write-embed")
        #: a recall's other read connections (the word index's MATCH and the vector retriever
        #: beside the trigram MATCH), two per recall
        self._read_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="cpersona-recall-read")
        self._pool_counts = PoolCounts()

    def _build_services(self, damage: str) -> None:
        """Each service once, with exactly the collaborators it uses."""
        settings, db, gateway, resident, queue, pause = (self.settings, self.db, self.gateway, self.resident,
                                                         self.queue, self.pause)
        self.placement = Placement(resident, queue)
        self.recalls = RecallService(settings, db, gateway, self.calibration, pause, self.updates, self.steps,
                                     self._query_pool, self._read_pool, self._prefetch, self._pool_counts)
        self.writes = WriteService(settings, db, gateway, queue, pause, self.steps, self.placement, self._write_pool)
        self.listing = ListingService(settings, db, self.steps)
        self.admin = AdminService(settings, db, resident, pause, self.calibration)
        self.status = StatusService(db, queue, pause, self.operating_context, self.updates, self.identity)
        self.quality = QualityService(settings, db, pause, self.calibration)
        self.health = HealthService(settings, db, gateway, resident, queue, pause, self.operating_context, self.steps,
                                    damage)
        self.exports = ExportService(settings, db)
        self.imports = ImportService(settings, db, gateway, queue, pause, self.placement)
        self.merges = MergeService(db, resident, queue, pause, self.calibration, self.placement)
        self.associations = AssociationService(db, pause, self.steps)
        self.graph = GraphService(db, self.steps)
        self.findings = FindingsService(self.health)

    @property
    def embedder(self) -> Embedder | None:
        """The embedding backend (None = mode none)."""
        return self.gateway.embedder

    @property
    def advisory(self) -> Advisory:
        return self.gateway.advisory

    @property
    def damage(self) -> str:
        """Why the file is served read-only ('' = it is not), or what the start-up check found."""
        return self.health.damage

    def _prepare_identity(self) -> bool:
        """The task queue's first step at start (`IdentityService.prepare`; bound late: the
        queue is built before the identity service it calls)."""
        return self.identity.prepare()

    # -------------------------------------------------------------- lifecycle
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
            self.health.start_integrity_watch()

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
            bulkwrite.recover(self.db, self.placement.forget)
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
        self.health.stop_integrity_watch()
        self._query_pool.shutdown(wait=True)
        self._write_pool.shutdown(wait=True)
        self._read_pool.shutdown(wait=True)
        self.db.close()

    # ------------------------------------------------------ reads (recall.py)
    def recall(self, req: RecallRequest, trace: dict | None = None, preview_rows: bool = False,
               full_content: bool = False, verbose: bool | None = None) -> RecallResult:
        return self.recalls.recall(req, trace, preview_rows, full_content, verbose)

    def recall_with_context(self, req: RecallRequest, external_context: object = None, preview_rows: bool = False,
                            full_content: bool = False, verbose: bool | None = None) -> dict[str, Any]:
        return self.recalls.recall_with_context(req, external_context, preview_rows, full_content, verbose)

    def get_contents(self, agent_id: object, refs: object) -> dict[str, Any]:
        return self.recalls.get_contents(agent_id, refs)

    def prefetch_query_vector(self, query: object) -> bool:
        return self.recalls.prefetch_query_vector(query)

    def pool_size(self, scope: Scope) -> int:
        return self.recalls.pool_size(scope)

    # ----------------------------------------------------- writes (writes.py)
    def store(self, agent_id: object, content: object, associations: object = None, **message: object) -> StoreResult:
        answer = self.writes.store(agent_id, content, **message)
        if associations is None:
            return answer
        return self.associations.on_stored(answer, agent_id, associations, message.get("project_id", ""),  # type: ignore[return-value]
                                           message.get("channel", ""))

    def archive_episode(self, agent_id: object, summary: object, **fields: object) -> ArchiveResult:
        return self.writes.archive_episode(agent_id, summary, **fields)

    def update_memory(self, memory_id: object, content: object, agent_id: object = None) -> RowChange:
        return self.writes.update_memory(memory_id, content, agent_id)

    # ------------------------------- declared associations (associations.py, graph.py)
    def declare_associations(self, agent_id: object, associations: object = None, anchor_ref: object = "",
                             retract: object = None, channel: object = "", project_id: object = "") -> Report:
        return self.associations.declare_associations(agent_id, associations, anchor_ref, retract, channel, project_id)

    def traverse(self, agent_id: object, entity: object, max_hops: object = 1, limit: object = 20,
                 channel: object = "", project_id: object = None, source_id: object = "") -> Report:
        return self.graph.traverse(agent_id, entity, max_hops, limit, channel, project_id, source_id)

    # --------------------------------------------------- listings (listing.py)
    def list_memories(self, agent_id: str | None = None, limit: int = 100, project_id: str | None = None,
                      cursor: str = "") -> Report:
        return self.listing.list_memories(agent_id, limit, project_id, cursor)

    def list_episodes(self, agent_id: str | None = None, limit: int = 50, project_id: str | None = None,
                      cursor: str = "") -> Report:
        return self.listing.list_episodes(agent_id, limit, project_id, cursor)

    # ------------------------------------------------ rows, profiles (admin.py)
    def delete_memory(self, memory_id: object, agent_id: object = None) -> RowChange:
        return self.admin.delete_memory(memory_id, agent_id)

    def delete_episode(self, episode_id: object, agent_id: object = None) -> RowChange:
        return self.admin.delete_episode(episode_id, agent_id)

    def lock_memory(self, memory_id: object, agent_id: object = None) -> RowChange:
        return self.admin.lock_memory(memory_id, agent_id)

    def unlock_memory(self, memory_id: object, agent_id: object = None) -> RowChange:
        return self.admin.unlock_memory(memory_id, agent_id)

    def delete_agent_data(self, agent_id: object) -> AgentErased:
        return self.admin.delete_agent_data(agent_id)

    def get_profile(self, agent_id: object) -> Profile:
        return self.admin.get_profile(agent_id)

    def update_profile(self, agent_id: object, profile: object) -> ProfileUpdate:
        return self.admin.update_profile(agent_id, profile)

    # -------------------------------------------------- the process (status.py)
    def pause_persistence(self, ttl_seconds: object = 1800) -> Report:
        return self.status.pause_persistence(ttl_seconds)

    def resume_persistence(self) -> Report:
        return self.status.resume_persistence()

    def persistence_status(self) -> Report:
        return self.status.persistence_status()

    def queue_status(self) -> Report:
        return self.status.queue_status()

    def get_operating_context(self, section: object = "") -> Report:
        return self.status.get_operating_context(section)

    def stats(self) -> Report:
        return self.status.stats()

    def check_update(self, refresh: object = False, apply: object = False) -> Report:
        return self.status.check_update(refresh, apply)

    # ------------------------------------------------------ quality (quality.py)
    def calibrate_threshold(self, agent_id: object, sample_size: object = 0, z_factor: object = 0,
                            method: object = "", percentile: object = 0) -> Report:
        return self.quality.calibrate_threshold(agent_id, sample_size, z_factor, method, percentile)

    def set_recall_precision(self, agent_id: object, precision: object = "", beta: object = 0) -> Report:
        return self.quality.set_recall_precision(agent_id, precision, beta)

    def get_recall_precision(self, agent_id: object) -> Report:
        return self.quality.get_recall_precision(agent_id)

    # -------------------------------------------------------- health (health.py)
    def check_health(self, agent_id: object = "", fix: object = False, checks: object = None) -> Report:
        return self.health.check_health(agent_id, fix, checks)

    def deep_check(self, agent_id: object, fix: object = False, checks: object = None) -> Report:
        return self.health.deep_check(agent_id, fix, checks)

    def get_session_findings(self, per_kind_limit: object = 5, include_summary: object = True) -> Report:
        return self.findings.get_session_findings(per_kind_limit, include_summary)

    # ------------------------------- portability (exporting, importing, merging)
    def export_memories(self, agent_id: object, output_path: object, include_embeddings: object = False, *,
                        confined: bool = True, progress: Progress | None = None) -> Report:
        return self.exports.export_memories(agent_id, output_path, include_embeddings, confined=confined,
                                            progress=progress)

    def import_memories(self, input_path: object, target_agent_id: object = "", dry_run: object = False, *,
                        confined: bool = True, progress: Progress | None = None) -> Report:
        return self.imports.import_memories(input_path, target_agent_id, dry_run, confined=confined,
                                            progress=progress)

    def merge_memories(self, source_agent_id: object, target_agent_id: object, strategy: object = "skip",
                       mode: object = "copy", dry_run: object = False, *,
                       progress: Progress | None = None) -> Report:
        return self.merges.merge_memories(source_agent_id, target_agent_id, strategy, mode, dry_run,
                                          progress=progress)

    def migrate_channel_axis(self, agent_id: object = "", dry_run: object = True,
                             globalize_unrecoverable: object = False) -> Report:
        return self.merges.migrate_channel_axis(agent_id, dry_run, globalize_unrecoverable)
