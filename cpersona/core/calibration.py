"""Calibration of the quality gate from the corpus itself (spec retrieval.md §16; no labels).

Two things are measured per agent and kept in the sidecar (cpersona/core/sidecar.py):

1. **Vector threshold** — the cosine above which two memories are more alike than random
   pairs. Null distribution = all distinct pairs of a random sample of the agent's stored
   vectors; then `percentile` (a quantile of the null), `zscore` (mean + z·std) or
   `separation` (default): positives = time-consecutive pairs ≤ CALIBRATE_TEMPORAL_WINDOW_MIN
   apart among the agent's newest rows ("same session"), threshold = the separation search
   below with β = 1. When the timestamps do not form at least `MIN_SESSIONS` sessions (a
   corpus loaded in one burst has no time structure) or give < 10 pairs, positives are each
   sampled row's nearest-neighbour similarity instead (`proxy_source: nn_fallback`).
2. **Fused gate** (§16.3) — the threshold on the signal the gate keys on (confidence when
   enabled, else the fusion mode's: cc / rsf / rrf). One draw = up to
   FUSED_GATE_SAMPLE_QUERIES of the agent's memories used as queries (their stored vector
   is the query vector; the memory itself is excluded before fusion) through the real
   ranking stages; every returned row is labelled positive when it lies within the session
   window of the query memory (or, without time structure, when its stored vector clears
   the vector threshold against the query's), else null. Threshold = separation search
   with the agent's β, constrained to keep at least CPERSONA_FUSED_GATE_MIN_KEEP (0.9) of
   the positives — the cap on how much the calibrated gate may remove, so a weak proxy
   cannot make the gate cut relevant rows. Median (upper) of FUSED_GATE_CALIBRATION_DRAWS
   draws. A gate whose draws separate the labels worse than Youden J `MIN_GATE_J` measured
   nothing: the heuristic gate is kept (`fused_gate_note`, not a failure).

Not calibrated (tried, rejected): the fusion weight α. Neither the temporal separation of
the vector channel nor a self-retrieval proxy tells a weak model from a good one — on
LoCoMo the bundled USE model and e5 score the same Youden J (0.14–0.48) although their best
α differ (measured before the cosine backfill: α 0.2 cost USE 0.005 NDCG@10 and gained e5
0.005) — so α stays CPERSONA_CC_ALPHA.

Separation search: 256 candidates evenly spaced over [min, max] of null ∪ positives; pick
the first argmax of TPR + β·(1 − FPR) (subject to TPR ≥ min_keep); threshold =
max(c*, CALIBRATE_FLOOR); reported youden_j = TPR − FPR at c*.

Precision: β = CPERSONA_FUSED_GATE_BETA if > 0, else strict 2.0 / balanced 1.0 / lenient
0.5 (CPERSONA_RECALL_PRECISION); `set_recall_precision` overrides it per agent.

Startup (background thread; never blocks `initialize`; only with an embedding backend):
a sidecar whose fingerprint (scoring version, embedding model and dimension of the stored
vectors) matches is restored at once; a stale, corrupt or lost one — or none at all on a
corpus with vectors — triggers a recalibration of the global threshold and every agent
owning ≥ 10 embedded memories (CALIBRATE_ON_MODEL_CHANGE, default on; AUTO_CALIBRATE
recalibrates on every start). Until that lands recall uses the heuristic gate and says so
in its `gate` field. Precision overrides (β) are never discarded.
"""

from __future__ import annotations

import json
import logging
import math
import random
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from cpersona.core import sidecar, validate
from cpersona.core.embedding import identity
from cpersona.core.errors import InvalidArgument
from cpersona.core.retrieval import gate as gate_mod
from cpersona.core.retrieval.candidate import MEMORY
from cpersona.core.retrieval.pipeline import RecallRequest, rank
from cpersona.core.timeutil import parse_ts
from cpersona.core.vectors import from_blob

if TYPE_CHECKING:  # pragma: no cover
    from cpersona.core.engine import Engine

log = logging.getLogger(__name__)

#: Fingerprint of the scoring functions the gates were measured with; bump on any change
#: to fusion, penalties, confidence or the gate rules (a mismatch makes the sidecar stale).
SCORING_VERSION = "cpersona-q4.3-cc"


def scoring_version(settings) -> str:
    """SCORING_VERSION plus the settings that change the scores the gates key on (fusion
    mode, cc α), e.g. "cpersona-q4.3-cc/cc/alpha=0.2": changing either makes a sidecar stale."""
    return f"{SCORING_VERSION}/{settings.recall_mode}/alpha={settings.cc_alpha:g}"
METHODS = ("separation", "percentile", "zscore")
PRECISIONS = {"strict": 2.0, "balanced": 1.0, "lenient": 0.5}
MIN_EMBEDDINGS = 10
SEARCH_POINTS = 256
MIN_SESSIONS = 3
MIN_POSITIVE_PAIRS = 10
FUSED_DEPTH = 20
FUSED_MIN_NULL, FUSED_MIN_POS = 10, 5
#: A fused gate whose proxy labels separate worse than this (Youden's J of the chosen
#: draw) measured nothing: the heuristic gate is kept instead of a floor-level gate.
MIN_GATE_J = 0.1
MAX_Z = 10.0


# ------------------------------------------------------------------------- math
def pair_similarities(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(full similarity matrix, its upper triangle without the diagonal = the null)."""
    sims = vectors @ vectors.T
    upper = np.triu_indices(len(vectors), 1)
    return sims, sims[upper].astype(np.float64)


@dataclass(frozen=True)
class Separation:
    threshold: float
    youden_j: float
    tpr: float
    fpr: float


def separation_search(null: np.ndarray, pos: np.ndarray, beta: float, floor: float, min_keep: float = 0.0) -> Separation:
    """Threshold maximising TPR + β·(1 − FPR) over 256 evenly spaced candidates (first
    argmax), among candidates keeping at least `min_keep` of the positives."""
    null = np.asarray(null, np.float64)
    pos = np.asarray(pos, np.float64)
    lo = float(min(null.min(), pos.min()))
    hi = float(max(null.max(), pos.max()))
    if hi <= lo:
        return Separation(max(lo, floor), 0.0, 1.0, 1.0)
    cands = np.linspace(lo, hi, SEARCH_POINTS)
    null_sorted, pos_sorted = np.sort(null), np.sort(pos)
    tpr = 1.0 - np.searchsorted(pos_sorted, cands, side="left") / len(pos_sorted)
    fpr = 1.0 - np.searchsorted(null_sorted, cands, side="left") / len(null_sorted)
    objective = tpr + beta * (1.0 - fpr)
    objective[tpr < min_keep - 1e-12] = -np.inf
    i = int(np.argmax(objective))
    return Separation(max(float(cands[i]), floor), float(tpr[i] - fpr[i]), float(tpr[i]), float(fpr[i]))


def sessions(stamps: list[datetime], window_s: float) -> int:
    """Number of sessions in sorted timestamps (a gap > window starts a new one)."""
    if not stamps:
        return 0
    return 1 + sum(1 for a, b in zip(stamps, stamps[1:]) if (b - a).total_seconds() > window_s)


def temporal_positives(vectors: np.ndarray, stamps: list[datetime], window_s: float) -> np.ndarray:
    """Cosines of time-consecutive pairs at most `window_s` apart (rows sorted by time)."""
    out = [float(vectors[i] @ vectors[i + 1]) for i in range(len(stamps) - 1)
           if (stamps[i + 1] - stamps[i]).total_seconds() <= window_s]
    return np.array(out, np.float64)


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def _stats(values: np.ndarray) -> dict[str, float | None]:
    return {"mean": _r(values.mean()), "std": _r(values.std()), "median": _r(np.median(values)),
            "p95": _r(np.quantile(values, 0.95))}


# ------------------------------------------------------------------ arguments
@dataclass(frozen=True)
class Request:
    agent_id: str
    sample_size: int
    z_factor: float
    method: str
    percentile: float


def _number(argument: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgument(argument, f"must be a finite number, got {value!r}")
    return float(value)


def parse_request(settings, agent_id: Any, sample_size: Any = 0, z_factor: Any = 0, method: Any = "",
                  percentile: Any = 0) -> Request:
    """Validate calibrate_threshold's arguments (0 / '' = the CPERSONA_CALIBRATE_* default).

    sample_size: integer 0..CALIBRATE_MAX_SAMPLE; z_factor: −10..10; percentile: (0, 1],
    or a percent in (1, 100]; method: separation | percentile | zscore.
    """
    agent = validate.identifier("agent_id", agent_id)
    cap = settings.calibrate_max_sample
    if isinstance(sample_size, bool) or not isinstance(sample_size, int):
        raise InvalidArgument("sample_size", f"must be an integer, got {type(sample_size).__name__}")
    if not 0 <= sample_size <= cap:
        raise InvalidArgument("sample_size", f"must be between 1 and {cap} (CPERSONA_CALIBRATE_MAX_SAMPLE), "
                                             f"or 0 for the default; got {sample_size}")
    n = min(sample_size or settings.calibrate_sample_size, cap)
    z = _number("z_factor", z_factor)
    if abs(z) > MAX_Z:
        raise InvalidArgument("z_factor", f"must be between -{MAX_Z:g} and {MAX_Z:g}, got {z:g}")
    z = z or settings.calibrate_z_factor
    if not isinstance(method, str):
        raise InvalidArgument("method", f"must be a string, got {type(method).__name__}")
    chosen = (method.strip().lower() or settings.calibrate_method)
    if chosen not in METHODS:
        raise InvalidArgument("method", f"must be one of {', '.join(METHODS)}; got {method!r}")
    p = _number("percentile", percentile)
    if p == 0:
        p = settings.calibrate_percentile
    elif 1 < p <= 100:
        p = p / 100.0
    if not 0 < p <= 1:
        raise InvalidArgument("percentile", f"must be in (0, 1] (or a percent in (1, 100]), got {percentile!r}")
    return Request(agent, n, z, chosen, p)


def resolve_precision(settings, precision: Any, beta: Any) -> tuple[float | None, str]:
    """(β, label) for set_recall_precision; (None, 'default') clears the override."""
    if not isinstance(precision, str):
        raise InvalidArgument("precision", f"must be a string, got {type(precision).__name__}")
    b = _number("beta", beta)
    if b < 0 or b > 100:
        raise InvalidArgument("beta", f"must be between 0 and 100 (0 = use precision), got {b:g}")
    if b > 0:
        return b, label_for(b)
    name = precision.strip().lower()
    if not name:
        return None, "default"
    if name not in PRECISIONS:
        raise InvalidArgument("precision", f"must be one of strict, balanced, lenient (or pass beta > 0); got {precision!r}")
    return PRECISIONS[name], name


def label_for(beta: float) -> str:
    for name, value in PRECISIONS.items():
        if abs(value - beta) < 1e-9:
            return name
    return "custom"


def global_beta(settings) -> float:
    return settings.fused_gate_beta if settings.fused_gate_beta > 0 else PRECISIONS.get(settings.recall_precision, 1.0)


# ------------------------------------------------------------------- recall view
@dataclass(frozen=True)
class AgentGate:
    """What one recall uses: thresholds (None = heuristic) and the notice to show."""

    vector_threshold: float
    fused_gate: float | None = None
    signal: str | None = None
    cosine_min: float | None = None
    notice: dict[str, Any] | None = None


@dataclass
class _Fingerprint:
    model: str | None
    dim: int | None
    scoring_version: str = SCORING_VERSION

    def describe(self) -> str:
        return f"model {self.model or '?'} ({self.dim or '?'}-d), scoring {self.scoring_version}"


@dataclass
class _Startup:
    action: str = "pending"
    running: bool = False
    error: str = ""
    finished_at: str = ""
    agents: int = 0


# ---------------------------------------------------------------- the state
class Calibration:
    """Per-agent calibration state of one engine (`engine.calibration`). Thread-safe."""

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self.settings = engine.settings
        self.path = sidecar.path_for(self.settings.db_file)
        self._lock = threading.RLock()
        self._run_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.global_threshold: float | None = None
        self.thresholds: dict[str, float] = {}
        self.gates: dict[str, float] = {}
        self.betas: dict[str, float] = {}
        self.signal: str | None = None
        self.global_fused_gate: float | None = None
        self.calibrated_at: str | None = None
        self.fingerprint: _Fingerprint | None = None  # what the applied numbers were measured with
        self.failures: dict[str, str] = {}
        self.removed: set[str] = set()
        self.cleared_betas: set[str] = set()
        self.problem = ""  # sidecar-level reason the gates are heuristic (shown in recall)
        self.sidecar_state = "absent"
        self.sidecar_error = ""
        self.startup = _Startup()
        self._loaded = sidecar.load(self.path)
        self._restore()

    # ------------------------------------------------------------ identity
    def active_signal(self) -> str | None:
        s = self.settings
        if s.confidence_enabled:
            return "confidence"
        return s.recall_mode if s.recall_mode in ("cc", "rsf", "rrf") else None

    def _current_fingerprint(self) -> _Fingerprint | None:
        """Identity of the stored vectors (the DB's record; the live one once reconciled)."""
        state = self.engine.vector_state
        if state is None:
            with self.engine.db.read() as conn:
                state = identity.read_state(conn)
        if state.model is None or state.pending:
            return None
        return _Fingerprint(state.model, state.dim)

    def _stale_reason(self, data: dict[str, Any]) -> str:
        current = self._current_fingerprint()
        version = scoring_version(self.engine.settings)
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
        if self.engine.embedder is None:
            self.startup.action = "not_applicable"
            self.sidecar_state = self._loaded.status
            return
        loaded = self._loaded
        self.sidecar_state = loaded.status
        if loaded.status == "corrupt":
            self.sidecar_error = loaded.error
            self.problem = f"calibration file {self.path.name} is unreadable ({loaded.error})"
            return
        if loaded.status == "absent":
            with self.engine.db.read() as conn:
                record = sidecar.recorded(conn)
            if record is not None:
                self.sidecar_state = "lost"
                when = record.get("calibrated_at") or "earlier"
                self.problem = (f"calibration file {self.path.name if self.path else '(none)'} is missing although this "
                                f"database was calibrated ({when}); it was not restored with the database")
            return
        data = loaded.data
        for agent, beta in data.get("agent_betas", {}).items():
            self.betas[agent] = float(beta)  # precision overrides are never discarded
        reason = self._stale_reason(data)
        if reason:
            self.sidecar_state = "stale"
            self.problem = f"calibration file is stale: {reason}"
            return
        with self._lock:
            self.global_threshold = data.get("global_threshold")
            self.thresholds = {a: float(v) for a, v in data.get("agent_thresholds", {}).items()}
            self.gates = {a: float(v) for a, v in data.get("agent_fused_gates", {}).items()}
            self.signal = data.get("fused_gate_signal")
            self.global_fused_gate = data.get("global_fused_gate")
            self.calibrated_at = data.get("calibrated_at")
            self.fingerprint = _Fingerprint(data.get("embedding_model"), data.get("embedding_dim"))
        self.startup.action = "restored"

    # ------------------------------------------------------------- read side
    def beta(self, agent_id: str) -> float:
        with self._lock:
            return self.betas.get(agent_id, global_beta(self.settings))

    def vector_threshold(self, agent_id: str) -> float:
        with self._lock:
            if self._fresh() and agent_id in self.thresholds:
                return self.thresholds[agent_id]
            if self._fresh() and self.global_threshold is not None:
                return self.global_threshold
        return self.settings.vector_min_similarity

    def _fresh(self) -> bool:
        """The applied numbers still describe the live vectors (model not changed since)."""
        if self.fingerprint is None:
            return False
        state = self.engine.vector_state
        if state is None:
            return True
        return not state.pending and (state.model, state.dim) == (self.fingerprint.model, self.fingerprint.dim)

    def gate_for(self, agent_id: str) -> AgentGate:
        """The calibrated gate of `agent_id` for one recall, or the heuristic plus the
        notice explaining why (None when nothing is wrong)."""
        threshold = self.vector_threshold(agent_id)
        if self.engine.embedder is None:
            return AgentGate(threshold)
        with self._lock:
            fresh = self._fresh()
            calibrated = fresh and agent_id in self.thresholds
            signal = self.active_signal()
            gate = self.gates.get(agent_id) if calibrated and self.signal == signal else None
            failure = self.failures.get(agent_id)
            problem = self.problem
            if self.fingerprint is not None and not fresh:
                problem = ("the embedding model changed since calibration "
                           f"({self.fingerprint.describe()}); gates wait for recalibration")
            running = self.startup.running
        notice = None
        if failure:
            notice = {"state": "heuristic" if gate is None else "partial", "reason": failure,
                      "fix": f"call calibrate_threshold(agent_id={agent_id!r}) once the agent has ≥ 10 embedded memories"}
        elif not calibrated and problem:
            notice = {"state": "heuristic", "reason": problem,
                      "fix": ("recalibration is running in the background" if running else
                              f"call calibrate_threshold(agent_id={agent_id!r}) (or restore the calibration file)")}
        elif calibrated and gate is None and self.settings.fused_gate_enabled and signal and self.signal not in (None, signal):
            notice = {"state": "partial", "reason": f"fused gate was calibrated on {self.signal!r}, recall now keys on "
                      f"{signal!r}", "fix": f"call calibrate_threshold(agent_id={agent_id!r})"}
        return AgentGate(
            vector_threshold=threshold,
            fused_gate=gate if self.settings.fused_gate_enabled else None,
            signal=signal,
            cosine_min=threshold if calibrated else None,
            notice=notice,
        )

    def status(self, agent_id: str) -> dict[str, Any]:
        """Calibration state of one agent (get_recall_precision, check tools)."""
        g = self.gate_for(agent_id)
        with self._lock:
            out: dict[str, Any] = {
                "state": "calibrated" if g.cosine_min is not None else "heuristic",
                "vector_threshold": _r(g.vector_threshold),
                "fused_gate": _r(g.fused_gate), "signal": self.signal if g.fused_gate is not None else None,
                "sidecar": self.sidecar_state, "calibrated_at": self.calibrated_at,
                "startup": {"action": self.startup.action, "running": self.startup.running,
                            **({"error": self.startup.error} if self.startup.error else {})},
            }
        if g.notice:
            out["notice"] = g.notice
        return out

    # ------------------------------------------------------------ write side
    def forget_agent(self, agent_id: str) -> int:
        """Drop the agent's threshold, gate and β (delete_agent_data); persisted.
        Returns how many entries were removed."""
        with self._lock:
            dropped = 0
            for table in (self.thresholds, self.gates, self.betas, self.failures):
                if table.pop(agent_id, None) is not None:
                    dropped += 1
            self.removed.add(agent_id)
        if dropped and not self.engine.pause.active():
            self._persist()
        return dropped

    def set_beta(self, agent_id: str, beta: float | None) -> float | None:
        """Set (or clear with None) the agent's β; returns the previous override."""
        with self._lock:
            before = self.betas.get(agent_id)
            if beta is None:
                self.betas.pop(agent_id, None)
                self.cleared_betas.add(agent_id)
            else:
                self.betas[agent_id] = beta
                self.cleared_betas.discard(agent_id)
            return before

    def restore_beta(self, agent_id: str, expected: float | None, previous: float | None) -> None:
        """Roll back `set_beta` after a failed recalibration, unless another writer changed
        the override meanwhile (its value is no longer `expected`)."""
        with self._lock:
            if self.betas.get(agent_id) != expected:
                return
            if previous is None:
                self.betas.pop(agent_id, None)
            else:
                self.betas[agent_id] = previous
                self.cleared_betas.discard(agent_id)

    # ---------------------------------------------------------- calibration
    def _dim(self) -> int | None:
        emb = self.engine.embedder
        if emb is not None and emb.dim is not None:
            return emb.dim
        fp = self._current_fingerprint()
        return fp.dim if fp else None

    def _sample(self, agent: str | None, n: int, dim: int, seed: str) -> tuple[list[int], np.ndarray]:
        """Up to n random embedded memories of `agent` (None = all) at dimension `dim`,
        outside any stale re-embedding range: (ids, vectors)."""
        state = self.engine.vector_state or identity.VectorState()
        lo, hi = state.stale_range("memories")
        where = "embedding IS NOT NULL AND length(embedding) = ? AND NOT (id > ? AND id <= ?)"
        params: list[Any] = [4 * dim, lo, hi]
        if agent is not None:
            where += " AND agent_id = ?"
            params.append(agent)
        with self.engine.db.read() as conn:
            ids = [r[0] for r in conn.execute(f"SELECT id FROM memories WHERE {where} ORDER BY id", params)]
            if len(ids) > n:
                ids = sorted(random.Random(f"{seed}:{len(ids)}").sample(ids, n))
            vectors = self._vectors(conn, ids)
        keep = [i for i in ids if i in vectors]
        return keep, (np.stack([vectors[i] for i in keep]) if keep else np.zeros((0, dim), np.float32))

    @staticmethod
    def _vectors(conn, ids: list[int]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            marks = ",".join("?" * len(chunk))
            for row_id, blob in conn.execute(f"SELECT id, embedding FROM memories WHERE id IN ({marks})", chunk):
                vec = from_blob(blob)
                if vec is not None:
                    out[row_id] = vec
        return out

    def _newest(self, agent: str | None, n: int, dim: int) -> tuple[np.ndarray, list[datetime]]:
        """The n embedded rows with the greatest timestamp, sorted by time."""
        where = "embedding IS NOT NULL AND length(embedding) = ?"
        params: list[Any] = [4 * dim]
        if agent is not None:
            where += " AND agent_id = ?"
            params.append(agent)
        with self.engine.db.read() as conn:
            rows = conn.execute(f"SELECT id, timestamp FROM memories WHERE {where} ORDER BY timestamp DESC, id DESC LIMIT ?",
                                [*params, n]).fetchall()
            vectors = self._vectors(conn, [r[0] for r in rows])
        parsed = sorted((parse_ts(ts), i) for i, ts in rows if parse_ts(ts) is not None and i in vectors)
        if not parsed:
            return np.zeros((0, dim), np.float32), []
        return np.stack([vectors[i] for _, i in parsed]), [t for t, _ in parsed]

    def calibrate(self, agent_id: Any, sample_size: Any = 0, z_factor: Any = 0, method: Any = "",
                  percentile: Any = 0, persist: bool = True) -> dict[str, Any]:
        """calibrate_threshold (spec tools.md §15). Raises InvalidArgument for bad arguments;
        returns {ok: false, error} when the corpus cannot be calibrated."""
        req = parse_request(self.settings, agent_id, sample_size, z_factor, method, percentile)
        with self._run_lock:
            return self._calibrate(req, persist)

    def _fail(self, req: Request, error: str, **extra: Any) -> dict[str, Any]:
        if req.agent_id:
            with self._lock:
                self.failures[req.agent_id] = f"calibration failed: {error}"
        return {"ok": False, "error": error, "agent_id": req.agent_id, "method": req.method, **extra}

    def _calibrate(self, req: Request, persist: bool) -> dict[str, Any]:
        s = self.settings
        if self.engine.embedder is None:
            return self._fail(req, "embeddings are disabled (CPERSONA_EMBEDDING_MODE=none): there are no vectors to "
                                   "calibrate; recall uses the heuristic gate")
        dim = self._dim()
        if dim is None:
            return self._fail(req, "the embedding dimension is not known yet (the backend has not answered); retry shortly")
        agent = req.agent_id or None
        ids, vectors = self._sample(agent, req.sample_size, dim, f"{req.agent_id}")
        if len(ids) < MIN_EMBEDDINGS:
            return self._fail(req, f"need at least {MIN_EMBEDDINGS} embeddings of the active model ({dim}-d), found "
                                   f"{len(ids)}", sampled_embeddings=len(ids))
        sims, null = pair_similarities(vectors)
        floor = s.calibrate_floor
        out: dict[str, Any] = {"ok": True, "scope": "per_agent" if agent else "global", "agent_id": req.agent_id,
                               "sampled_embeddings": len(ids), "num_pairs": int(null.size), "method": req.method,
                               "z_factor": req.z_factor, "percentile": req.percentile, "embedding_dim": dim}
        fp = self._current_fingerprint() or _Fingerprint(self.engine.embedder.model_id, dim)
        out["embedding_model"] = fp.model
        # positives of the separation method: same-session pairs, else nearest neighbours
        window_s = s.calibrate_temporal_window_min * 60.0
        newest, stamps = self._newest(agent, req.sample_size, dim)
        n_sessions = sessions(stamps, window_s)
        temporal = temporal_positives(newest, stamps, window_s) if n_sessions >= MIN_SESSIONS else np.zeros(0)
        temporal_ok = temporal.size >= MIN_POSITIVE_PAIRS
        if req.method == "percentile":
            raw = float(np.quantile(null, req.percentile))
        elif req.method == "zscore":
            raw = float(null.mean() + req.z_factor * null.std())
        else:
            if temporal_ok:
                pos, source = temporal, "temporal"
            else:
                masked = sims - np.eye(len(ids), dtype=sims.dtype) * 4.0
                pos, source = masked.max(axis=1).astype(np.float64), "nn_fallback"
            sep = separation_search(null, pos, 1.0, floor)
            raw = sep.threshold
            out.update(proxy_source=source, youden_j=_r(sep.youden_j), pos_admit_rate=_r(float((pos >= sep.threshold).mean())),
                       pos_mean=_r(float(pos.mean())))
            if source == "nn_fallback":
                out["proxy_note"] = (f"timestamps form {n_sessions} session(s) (< {MIN_SESSIONS}) or too few same-session "
                                     "pairs; positives are nearest-neighbour similarities")
        threshold = round(max(raw, floor), 4)
        out.update(distribution=_stats(null), null_admit_rate=_r(float((null >= threshold).mean())),
                   old_threshold=_r(self.vector_threshold(req.agent_id) if agent else
                                    (self.global_threshold if self.global_threshold is not None else s.vector_min_similarity)),
                   new_threshold=threshold)
        with self._lock:
            if agent:
                self.thresholds[req.agent_id] = threshold
                self.failures.pop(req.agent_id, None)
                self.removed.discard(req.agent_id)
            else:
                self.global_threshold = threshold
            self.fingerprint = fp
            self.calibrated_at = datetime.now(timezone.utc).isoformat()
        if agent and s.fused_gate_enabled:
            fused = self._fused_gate(req.agent_id, threshold, source_temporal=temporal_ok)
            if "kept_heuristic" in fused:
                out["fused_gate"] = None
                out["fused_gate_note"] = fused["kept_heuristic"]
                out["fused_gate_measured"] = fused["measured"]
                with self._lock:
                    self.gates.pop(req.agent_id, None)
                    self.signal = fused["measured"]["signal"]  # measured on it: not "never calibrated"
            elif "error" in fused:
                out["fused_gate"] = None
                out["fused_gate_error"] = fused["error"]
                with self._lock:
                    self.gates.pop(req.agent_id, None)
                    self.failures[req.agent_id] = f"fused-gate calibration failed ({fused['error']}); heuristic gate in use"
            else:
                out["fused_gate"] = fused
                with self._lock:
                    self.gates[req.agent_id] = fused["threshold"]
                    self.signal = fused["signal"]
        if persist:
            error = self._persist()
            out["sidecar_persisted"] = not error
            if error:
                out["sidecar_error"] = error
        else:
            out["sidecar_persisted"] = False
        return out

    def _fused_gate(self, agent_id: str, vector_threshold: float, source_temporal: bool) -> dict[str, Any]:
        """§16.3 on the active signal, with the agent's β and the min-keep cap."""
        s = self.settings
        signal = self.active_signal()
        if signal is None:
            return {"error": "recall mode cascade without confidence scoring has no fused score to gate"}
        dim = self._dim()
        indexes = self.engine.indexes()
        if indexes is None or dim is None:
            return {"error": "vector index unavailable (embedding dimension unknown)"}
        beta = self.beta(agent_id)
        window_s = s.calibrate_temporal_window_min * 60.0
        with self.engine.db.read() as conn:
            candidates = conn.execute(
                "SELECT id, content, timestamp, embedding FROM memories WHERE agent_id = ? AND embedding IS NOT NULL "
                "AND length(embedding) = ? AND timestamp != '' ORDER BY id", (agent_id, 4 * dim)).fetchall()
        if len(candidates) < MIN_EMBEDDINGS:
            return {"error": f"need at least {MIN_EMBEDDINGS} embedded memories with a timestamp, found {len(candidates)}"}
        draws: list[dict[str, Any]] = []
        errors: list[str] = []
        queries_run = 0
        for draw in range(s.fused_gate_calibration_draws):
            if self._stop.is_set():
                break
            picked = random.Random(f"{agent_id}:{len(candidates)}:{draw}").sample(
                candidates, min(s.fused_gate_sample_queries, len(candidates)))
            null: list[float] = []
            pos: list[float] = []
            for row_id, content, ts, blob in picked:
                qts = parse_ts(ts)
                qvec = from_blob(blob)
                if not content.strip() or qts is None or qvec is None:
                    continue
                queries_run += 1
                rows = self._rank_as_query(agent_id, content, qvec, indexes, vector_threshold)
                missing = [c.id for c in rows if c.kind == MEMORY and c.id != row_id] if not source_temporal else []
                with self.engine.db.read() as conn:
                    row_vectors = self._vectors(conn, missing) if missing else {}
                for cand in rows:
                    if cand.id <= 0 or (cand.kind == MEMORY and cand.id == row_id):
                        continue
                    sig = gate_mod.signal(cand)
                    if sig is None or sig[0] != signal:
                        continue
                    if source_temporal:
                        cts = parse_ts(cand.timestamp)
                        if cts is None:
                            continue
                        positive = abs((cts - qts).total_seconds()) <= window_s
                    else:
                        vec = row_vectors.get(cand.id) if cand.kind == MEMORY else None
                        if vec is None:
                            continue
                        positive = float(vec @ qvec) >= vector_threshold
                    (pos if positive else null).append(sig[1])
            if len(null) < FUSED_MIN_NULL or len(pos) < FUSED_MIN_POS:
                errors.append(f"draw {draw}: {len(null)} null / {len(pos)} positive rows (need {FUSED_MIN_NULL} / {FUSED_MIN_POS})")
                continue
            nul, po = np.array(null), np.array(pos)
            sep = separation_search(nul, po, beta, s.calibrate_floor, s.fused_gate_min_keep)
            draws.append({"threshold": round(sep.threshold, 4), "youden_j": _r(sep.youden_j), "n_null": len(null),
                          "n_pos": len(pos), "null_admit_rate": _r(float((nul >= sep.threshold).mean())),
                          "pos_admit_rate": _r(float((po >= sep.threshold).mean())), "null_mean": _r(float(nul.mean())),
                          "pos_mean": _r(float(po.mean()))})
        if not draws:
            return {"error": "; ".join(errors[:3]) or "no draw ran"}
        draws.sort(key=lambda d: d["threshold"])
        chosen = dict(draws[len(draws) // 2])
        chosen.update(signal=signal, beta=beta, min_keep=s.fused_gate_min_keep, queries_run=queries_run,
                      proxy_source="temporal" if source_temporal else "semantic")
        if len(draws) > 1:
            chosen["threshold_draws"] = [d["threshold"] for d in draws]
        if (chosen["youden_j"] or 0.0) < MIN_GATE_J:
            return {"kept_heuristic": (
                f"the {chosen['proxy_source']} proxy does not separate related from unrelated rows on the {signal} score "
                f"(Youden J {chosen['youden_j']} < {MIN_GATE_J}); the heuristic gate is kept"), "measured": chosen}
        return chosen

    def _rank_as_query(self, agent_id: str, content: str, qvec: np.ndarray, indexes, vector_threshold: float) -> list:
        """The ranked pre-gate rows for `content` as a query (the memory itself excluded)."""
        req = RecallRequest(agent_id, content[: validate.MAX_QUERY_CHARS], FUSED_DEPTH, exclude_contents=(content,))
        with self.engine.db.read() as conn:
            ctx = self.engine._recall_context(conn, indexes, qvec, agent_id, override=AgentGate(
                vector_threshold), inject_profiles=False)
            with self.engine._index_lock:
                return rank(ctx, req)

    # ------------------------------------------------------------- persisting
    def _payload(self) -> dict[str, Any]:
        with self._lock:
            fp = self.fingerprint or self._current_fingerprint() or _Fingerprint(None, None)
            payload: dict[str, Any] = {
                "format": sidecar.FORMAT, "embedding_dim": fp.dim, "embedding_model": fp.model,
                "scoring_version": scoring_version(self.engine.settings), "global_threshold": self.global_threshold,
                "agent_thresholds": dict(self.thresholds), "global_fused_gate": self.global_fused_gate,
                "agent_fused_gates": dict(self.gates), "fused_gate_signal": self.signal,
                "agent_betas": dict(self.betas),
                "calibrated_at": datetime.now(timezone.utc).isoformat(),
            }
            removed = set(self.removed)
            cleared = set(self.cleared_betas)
        # carry entries another writer added meanwhile (same fingerprint only), except purged agents
        current = sidecar.load(self.path)
        if current.status == "ok" and not self._stale_reason(current.data) and \
                (current.data.get("embedding_model"), current.data.get("embedding_dim")) == (fp.model, fp.dim):
            for key in ("agent_thresholds", "agent_fused_gates", "agent_betas"):
                for agent, value in current.data.get(key, {}).items():
                    if key == "agent_betas" and agent in cleared:
                        continue
                    if agent not in removed and agent not in payload[key]:
                        payload[key][agent] = value
        return payload

    def _persist(self) -> str:
        """Write the sidecar (and note it in the DB). Returns '' or the error text."""
        if self.path is None:
            return "in-memory database: nothing is persisted"
        payload = self._payload()
        error = sidecar.write_atomic(self.path, payload)
        with self._lock:
            if error:
                self.sidecar_error = error
                log.warning("calibration file %s could not be written: %s", self.path, error)
                return error
            self.sidecar_state, self.sidecar_error = "ok", ""
        try:
            with self.engine.db.write() as conn:
                sidecar.record_written(conn, self.path, payload["calibrated_at"])
        except Exception as err:  # noqa: BLE001 — the file is written; the record only improves diagnostics
            log.warning("could not record the calibration file in the database: %s", err)
        return ""

    # --------------------------------------------------------------- startup
    def start(self) -> None:
        """Run the startup guard in a background thread (only with an embedding backend)."""
        if self.engine.embedder is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._startup_guard, name="cpersona-calibration", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _plan(self) -> str:
        s = self.settings
        state = self.sidecar_state
        if state == "ok" and not s.auto_calibrate:
            if s.fused_gate_enabled and self.thresholds and self.signal != self.active_signal():
                return "gate_calibrated"
            return "restored"
        changed = state in ("absent", "lost", "corrupt", "stale")
        if not (s.auto_calibrate or (s.calibrate_on_model_change and changed)):
            return "noop"
        return {"stale": "recalibrated", "corrupt": "recalibrated_corrupt", "lost": "recalibrated_lost"}.get(
            state, "auto" if s.auto_calibrate else "initial")

    def _agents(self, dim: int) -> list[str]:
        with self.engine.db.read() as conn:
            rows = conn.execute("SELECT agent_id FROM memories WHERE embedding IS NOT NULL AND length(embedding) = ? "
                                "GROUP BY agent_id HAVING COUNT(*) >= ? ORDER BY agent_id", (4 * dim, MIN_EMBEDDINGS))
            return [r[0] for r in rows]

    def _startup_guard(self) -> None:
        plan = self._plan()
        with self._lock:
            self.startup.action = plan
        if plan in ("restored", "noop"):
            if plan == "noop" and self.sidecar_state == "stale":
                log.warning("%s; stale gates are not applied (CPERSONA_CALIBRATE_ON_MODEL_CHANGE=false)", self.problem)
            return
        with self._lock:
            self.startup.running = True
        try:
            if self._current_fingerprint() is None:  # no vectors stored yet (or a re-embedding is pending)
                with self._lock:
                    self.startup.action = "noop"
                return
            dim = self._wait_dim()
            if dim is None:
                if self._stop.is_set():
                    return
                raise RuntimeError("embedding dimension unknown (backend not answering)")
            if self.sidecar_state in ("stale", "corrupt") and self.path is not None:
                sidecar.backup(self.path, (self._loaded.data or {}).get("scoring_version") if self._loaded.status == "ok"
                               else "corrupt")
            agents = self._agents(dim)
            if not agents:
                with self._lock:
                    self.startup.action = "noop"
                return
            if plan != "gate_calibrated":
                with self._run_lock:
                    res = self._calibrate(parse_request(self.settings, ""), persist=False)
                if not res.get("ok"):
                    raise RuntimeError(res.get("error"))
            done = 0
            for agent in agents:
                if self._stop.is_set():
                    return
                with self._run_lock:
                    res = self._calibrate(parse_request(self.settings, agent), persist=False)
                done += bool(res.get("ok"))
            if self.engine.pause.active():
                error = "persistence paused: calibration applied in memory only"
            else:
                error = self._persist()
            with self._lock:
                self.startup.agents = done
                self.startup.error = error
                self.problem = ""
        except Exception as err:  # noqa: BLE001 — reported through status() and the recall notice
            log.warning("startup calibration failed: %s", err)
            with self._lock:
                self.startup.error = f"{type(err).__name__}: {err}"
                if self.problem:
                    self.problem += f"; recalibration at startup failed: {err}"
        finally:
            with self._lock:
                self.startup.running = False
                self.startup.finished_at = datetime.now(timezone.utc).isoformat()

    def _wait_dim(self, timeout: float = 120.0) -> int | None:
        """The backend's dimension (an http backend learns it from its first answer: the
        vector index and the fused-gate queries need it)."""
        deadline = time.monotonic() + timeout
        while not self._stop.is_set():
            emb = self.engine.embedder
            dim = emb.dim if emb is not None else None
            if dim is not None:
                return dim
            if self.engine.embed_texts(["calibration probe"]) is not None:
                continue
            if time.monotonic() > deadline:
                return None
            self._stop.wait(1.0)
        return None


def describe(payload: dict[str, Any]) -> str:  # pragma: no cover - debugging aid
    return json.dumps(payload, ensure_ascii=False, indent=1)
