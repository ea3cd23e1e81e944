"""The calibration state of one process: per-agent vector thresholds, fused gates and
precision overrides (β), what they were measured with (the fingerprint), and what a
recall uses (`gate_for`).

A sidecar whose fingerprint (scoring version, embedding model and dimension of the stored
vectors) matches is restored at once; a stale, corrupt or lost one is recorded as the
reason the gates are heuristic (`problem`), shown in every recall's `gate` notice until a
recalibration lands. Precision overrides (β) are never discarded.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cpersona.calibration import growth, sidecar, sync
from cpersona.calibration.ports import VectorSpace
from cpersona.calibration.precision import global_beta
from cpersona.calibration.records import (  # noqa: F401 — SCORING_VERSION, scoring_version: their historical home
    SCORING_VERSION,
    BetaSnapshot,
    Fingerprint,
    Startup,
    _put,
    scoring_version,
)
from cpersona.calibration.stats import rounded
from cpersona.calibration.store import store_for
from cpersona.config import Settings
from cpersona.retrieval.gate import AgentGate
from cpersona.storage import Database

log = logging.getLogger(__name__)


class CalibrationState:
    """Thresholds, gates and β per agent, with their fingerprint. Thread-safe."""

    def __init__(self, settings: Settings, db: Database, vectors: VectorSpace) -> None:
        self.settings = settings
        self.db = db
        self.vectors = vectors
        self.store = store_for(settings, db)
        self.path: Path | None = self.store.path if self.store is not None else None
        self.lock = threading.RLock()  # guards the tables below (sync.py and startup.py take it too)
        self.global_threshold: float | None = None
        self.thresholds: dict[str, float] = {}
        self.gates: dict[str, float] = {}
        self.betas: dict[str, float] = {}
        self.signal: str | None = None
        self.global_fused_gate: float | None = None
        #: rows each default-request calibration was measured on (agent, or growth.GLOBAL)
        self.calibrated_rows: dict[str, int] = {}
        #: each calibration's threshold in σ of its random pairs above their mean (gate.query_cosine_cut)
        self.cosine_z: dict[str, float] = {}
        self.calibrated_at: str | None = None
        self.fingerprint: Fingerprint | None = None  # what the applied numbers were measured with
        self.failures: dict[str, str] = {}
        self.removed: set[str] = set()
        #: agents erased here (delete_agent_data) → when: written to the store's `erased_agents` at the
        #: next save, so another server drops its entry of them instead of writing it back
        self.erased: dict[str, str] = {}
        #: agents calibrated here since the last save: an older erasure in the store does not drop them
        self.fresh: set[str] = set()
        #: the store-wide threshold was measured here since the last save
        self.global_fresh = False
        #: agents whose β override was set or cleared here since the last save (cleared: `cleared_betas`)
        self.betas_changed: set[str] = set()
        self.cleared_betas: set[str] = set()
        self.problem = ""  # sidecar-level reason the gates are heuristic (shown in recall)
        self.sidecar_state = "absent"
        self.sidecar_error = ""
        self.startup = Startup()
        self.watch = sync.StoreWatch(self.store.stamp) if self.store is not None else None
        self.loaded = self.store.load() if self.store is not None else sidecar.Loaded("absent")
        self._restore()

    # ------------------------------------------------------------ identity
    def active_signal(self) -> str | None:
        """The score the gate keys on: confidence when enabled, else the fusion mode's."""
        s = self.settings
        if s.confidence_enabled:
            return "confidence"
        return s.recall_mode if s.recall_mode in ("cc", "rsf", "rrf") else None

    def fused_signal(self) -> str | None:
        """The fused score a calibrated fused gate keys on: `active_signal`, except cc (and
        cascade), which has none. cc mixes a RELATIVE keyword score (bm25 / the query's best
        hit), no absolute evidence: a gate on it let rows through that neither their cosine
        nor their words carried (on the long-haystack store more rows per question at
        chance-level cosines, and answers pushed out of the first ten — measured:
        benchmarks/rounds/2026-12-01-round-07-calibration.md). A cc row is gated on its own
        cosine and word coverage (`gate.Gate.passes`)."""
        signal = self.active_signal()
        return None if signal == "cc" else signal

    def current_fingerprint(self) -> Fingerprint | None:
        """Identity of the stored vectors (the DB's record; the live one once reconciled)."""
        state = self.vectors.current_state()
        if state is None:
            with self.db.read() as s:
                state = s.meta.vector_state()
        if state.model is None or state.pending:
            return None
        return Fingerprint(state.model, state.dim)

    def stale_reason(self, data: dict[str, Any]) -> str:
        """'' when a sidecar payload describes the live vectors and scoring, else why not."""
        current = self.current_fingerprint()
        version = scoring_version(self.settings)
        if data.get("scoring_version") != version:
            return f"scoring version {data.get('scoring_version')!r} ≠ {version!r}"
        if current is None:
            return "no current vectors to compare with (none stored, or a re-embedding is pending)"
        if (data.get("embedding_model"), data.get("embedding_dim")) != (current.model, current.dim):
            return (f"measured with {data.get('embedding_model')} ({data.get('embedding_dim')}-d), the stored vectors "
                    f"are {current.model} ({current.dim}-d)")
        return ""

    def _restore(self) -> None:
        """Apply a fresh sidecar now (cheap, synchronous); otherwise record why not."""
        loaded = self.loaded
        self.sidecar_state = loaded.status
        if self.vectors.model_id is None:
            self.startup.action = "not_applicable"
            return
        if loaded.status == "corrupt":
            self.sidecar_error = loaded.error
            self.problem = f"{self.store.label if self.store else 'calibration'} is unreadable ({loaded.error})"
            return
        if loaded.status == "absent":
            self._check_lost()
            return
        data = loaded.data
        for agent, beta in data.get("agent_betas", {}).items():
            self.betas[agent] = float(beta)  # precision overrides are never discarded
        reason = self.stale_reason(data)
        if reason:
            self.sidecar_state = "stale"
            self.problem = f"calibration file is stale: {reason}"
            return
        with self.lock:
            self.global_threshold = data.get("global_threshold")
            self.thresholds = {a: float(v) for a, v in data.get("agent_thresholds", {}).items()}
            self.gates = {a: float(v) for a, v in data.get("agent_fused_gates", {}).items()}
            self.signal = data.get("fused_gate_signal")
            self.global_fused_gate = data.get("global_fused_gate")
            self.calibrated_rows = {a: int(v) for a, v in data.get("calibrated_rows", {}).items()}
            self.cosine_z = {a: float(v) for a, v in data.get("cosine_z", {}).items()}
            self.calibrated_at = data.get("calibrated_at")
            self.fingerprint = Fingerprint(data.get("embedding_model"), data.get("embedding_dim"))
        self.startup.action = "restored"

    def _check_lost(self) -> None:
        """No file: 'lost' when the database records that one was written."""
        record = self.store.lost() if self.store is not None else None
        if record is not None:
            self.sidecar_state = "lost"
            when = record.get("calibrated_at") or "earlier"
            self.problem = (f"calibration file {self.path.name if self.path else '(none)'} is missing although this "
                            f"database was calibrated ({when}); it was not restored with the database")

    # ------------------------------------------------------------- read side
    def beta(self, agent_id: str) -> float:
        """The agent's β (its override, else the server default)."""
        with self.lock:
            return self.betas.get(agent_id, global_beta(self.settings))

    def vector_threshold(self, agent_id: str) -> float:
        """The agent's calibrated cosine threshold, else the global one, else the setting."""
        with self.lock:
            if self._fresh() and agent_id in self.thresholds:
                return self.thresholds[agent_id]
            if self._fresh() and self.global_threshold is not None:
                return self.global_threshold
        return self.settings.vector_min_similarity

    def _fresh(self) -> bool:
        """The applied numbers still describe the live vectors (model not changed since)."""
        if self.fingerprint is None:
            return False
        state = self.vectors.current_state()
        if state is None:
            return True
        return not state.pending and (state.model, state.dim) == (self.fingerprint.model, self.fingerprint.dim)

    def gate_for(self, agent_id: str) -> AgentGate:
        """The calibrated gate of `agent_id` for one recall, or the heuristic plus the
        notice explaining why (None when nothing is wrong)."""
        self.pick_up()
        threshold = self.vector_threshold(agent_id)
        beta = self.beta(agent_id)
        if self.vectors.model_id is None:
            return AgentGate(threshold, beta=beta)
        with self.lock:
            fresh = self._fresh()
            calibrated = fresh and agent_id in self.thresholds
            # an agent without its own calibration uses the store's (the spec's agent → global → setting)
            borrowed = fresh and not calibrated and self.global_threshold is not None
            z = self.cosine_z.get(agent_id if calibrated else growth.GLOBAL) if calibrated or borrowed else None
            signal = self.active_signal()
            fused = self.fused_signal()
            gate = self.gates.get(agent_id) if calibrated and fused is not None and self.signal == fused else None
            failure = self.failures.get(agent_id)
            problem = self.problem
            if self.fingerprint is not None and not fresh:
                problem = ("the embedding model changed since calibration "
                           f"({self.fingerprint.describe()}); gates wait for recalibration")
            running = self.startup.running
        return AgentGate(
            vector_threshold=threshold,
            fused_gate=gate if self.settings.fused_gate_enabled else None,
            signal=signal,
            cosine_min=threshold if calibrated or borrowed else None,
            cosine_z=z,
            beta=beta,
            notice=self._notice(agent_id, calibrated, gate, failure, problem, running, fused),
        )

    def pick_up(self) -> None:
        """Merge what another server on this store saved since this one last looked (calibration/sync.py)."""
        sync.pick_up(self)

    def _notice(self, agent_id: str, calibrated: bool, gate: float | None, failure: str | None, problem: str,
                running: bool, signal: str | None) -> dict[str, Any] | None:
        if failure:
            return {"state": "heuristic" if gate is None else "partial", "reason": failure,
                    "fix": f"call calibrate_threshold(agent_id={agent_id!r}) once the agent has ≥ 10 embedded memories"}
        if not calibrated and problem:
            return {"state": "heuristic", "reason": problem,
                    "fix": ("recalibration is running in the background" if running else
                            f"call calibrate_threshold(agent_id={agent_id!r}) (or restore the calibration file)")}
        if calibrated and gate is None and self.settings.fused_gate_enabled and signal and \
                self.signal not in (None, signal):
            return {"state": "partial", "reason": f"fused gate was calibrated on {self.signal!r}, recall now keys on "
                    f"{signal!r}", "fix": f"call calibrate_threshold(agent_id={agent_id!r})"}
        return None

    def status(self, agent_id: str) -> dict[str, Any]:
        """Calibration state of one agent (get_recall_precision)."""
        g = self.gate_for(agent_id)
        with self.lock:
            out: dict[str, Any] = {
                "state": "heuristic" if g.cosine_min is None else "calibrated" if agent_id in self.thresholds
                else "global",
                "vector_threshold": rounded(g.vector_threshold),
                "fused_gate": rounded(g.fused_gate), "signal": self.signal if g.fused_gate is not None else None,
                "sidecar": self.sidecar_state, "calibrated_at": self.calibrated_at,
                "startup": {"action": self.startup.action, "running": self.startup.running,
                            **({"error": self.startup.error} if self.startup.error else {})},
            }
        if g.notice:
            out["notice"] = g.notice
        return out

    # ------------------------------------------------------------ write side
    def drop_agent(self, agent_id: str, erased_here: bool = True) -> int:
        """Forget the agent's threshold, gate, β and failure; returns how many were held.
        `erased_here`: this process erased it (recorded for the store's `erased_agents`)."""
        with self.lock:
            dropped = 0
            for table in (self.thresholds, self.gates, self.betas, self.failures, self.calibrated_rows, self.cosine_z):
                if table.pop(agent_id, None) is not None:
                    dropped += 1
            if erased_here:
                self.removed.add(agent_id)
                self.erased[agent_id] = datetime.now(UTC).isoformat()
                self.fresh.discard(agent_id)
        return dropped

    def set_beta(self, agent_id: str, beta: float | None) -> BetaSnapshot:
        """Set (or clear with None) the agent's β; returns what `restore_beta` needs to undo it."""
        with self.lock:
            before = BetaSnapshot(self.betas.get(agent_id), agent_id in self.cleared_betas,
                                  self.failures.get(agent_id))
            self.betas_changed.add(agent_id)
            if beta is None:
                self.betas.pop(agent_id, None)
                self.cleared_betas.add(agent_id)
            else:
                self.betas[agent_id] = beta
                self.cleared_betas.discard(agent_id)
            return before

    def restore_beta(self, agent_id: str, expected: float | None, previous: BetaSnapshot) -> None:
        """Roll back `set_beta` after a failed recalibration — the override and the failure
        note the recalibration left (a refused call changes nothing) —, unless another writer
        changed the override meanwhile (its value is no longer `expected`)."""
        with self.lock:
            if self.betas.get(agent_id) != expected:
                return
            _put(self.betas, agent_id, previous.beta)
            _put(self.failures, agent_id, previous.failure)
            (self.cleared_betas.add if previous.cleared else self.cleared_betas.discard)(agent_id)

    # ------------------------------------------------------------- persisting
    def payload(self, current: sidecar.Loaded | None = None) -> dict[str, Any]:
        """The state to store; entries another process added meanwhile to `current` (the
        stored state; read from the store when None — same fingerprint only) are carried
        over, except for agents purged or β cleared here; agents another process erased
        (`erased_agents` of `current`) are forgotten here too unless calibrated here since."""
        if current is None:
            current = self.store.load() if self.store is not None else sidecar.Loaded("absent")
        fp = self.fingerprint or self.current_fingerprint() or Fingerprint(None, None)
        same = current.status == "ok" and not self.stale_reason(current.data) and \
            (current.data.get("embedding_model"), current.data.get("embedding_dim")) == (fp.model, fp.dim)
        erased = {a: t for a, t in current.data.get("erased_agents", {}).items() if a not in self.fresh} if same else {}
        if same:  # what another server saved since wins where nothing changed here (calibration/sync.py)
            sync.merge(self, current.data)
        with self.lock:
            payload: dict[str, Any] = {
                "format": sidecar.FORMAT, "embedding_dim": fp.dim, "embedding_model": fp.model,
                "scoring_version": scoring_version(self.settings), "global_threshold": self.global_threshold,
                "agent_thresholds": dict(self.thresholds), "global_fused_gate": self.global_fused_gate,
                "agent_fused_gates": dict(self.gates), "fused_gate_signal": self.signal,
                "agent_betas": dict(self.betas), "calibrated_rows": dict(self.calibrated_rows),
                "cosine_z": dict(self.cosine_z),
                "calibrated_at": datetime.now(UTC).isoformat(),
            }
            removed = set(self.removed)
            cleared = set(self.cleared_betas)
        if same:
            for key in ("agent_thresholds", "agent_fused_gates", "agent_betas", "calibrated_rows", "cosine_z"):
                for agent, value in current.data.get(key, {}).items():
                    if key == "agent_betas" and agent in cleared:
                        continue
                    if key in ("calibrated_rows", "cosine_z") and self._measured_here(agent, payload):
                        continue  # this process measured it: an absent entry is deliberate (own arguments, no z)
                    if agent not in removed and agent not in erased and agent not in payload[key]:
                        payload[key][agent] = value
        with self.lock:
            recent = sorted({**erased, **self.erased}.items(), key=lambda kv: kv[1])[-sidecar.MAX_ERASED:]
        payload["erased_agents"] = dict(recent)
        return payload

    @staticmethod
    def _measured_here(key: str, payload: dict[str, Any]) -> bool:
        """Whether `payload` holds this process's threshold for `key` (an agent, or "" for the global one)."""
        return payload["global_threshold"] is not None if key == "" else key in payload["agent_thresholds"]

    def persist(self) -> str:
        """Write the state to its store (the sidecar file, noted in the DB; or the shared
        database's record). Returns '' or the error text."""
        if self.store is None:
            return "in-memory database: nothing is persisted"
        error = self.store.save(self.payload)
        with self.lock:
            if error:
                self.sidecar_error = error
                log.warning("%s could not be written: %s", self.store.label, error)
                return error
            self.sidecar_state, self.sidecar_error = "ok", ""
            if self.watch is not None:
                self.watch.mark()
            self.fresh.clear()  # the store holds them now; an erasure written after this one wins
            self.erased.clear()  # … and the store carries ours (`erased_agents`) to the other servers
            self.removed.clear()
            self.global_fresh = False
            self.betas_changed.clear()
            self.cleared_betas.clear()
        return ""
