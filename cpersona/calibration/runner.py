"""`Calibration`: the calibration state of one process plus the measurements that update it
(calibrate_threshold) and the startup recalibration.

**Vector threshold** — the cosine above which two memories are more alike than random
pairs. Null distribution = all distinct pairs of a random sample of the agent's stored
vectors; then `percentile` (a quantile of the null), `zscore` (mean + z·std) or
`separation` (default): positives = time-consecutive pairs ≤ CALIBRATE_TEMPORAL_WINDOW_MIN
apart among the agent's newest rows ("same session"), threshold = the separation search
(calibration/stats.py) with β = 1. When the timestamps do not form at least `MIN_SESSIONS`
sessions (a corpus loaded in one burst has no time structure) or give < 10 pairs,
positives are each sampled row's nearest-neighbour similarity instead
(`proxy_source: nn_fallback`). The per-agent **fused gate** follows (calibration/fused.py).

Not calibrated here: the fusion weight α. It is measured at recall time from the resident
index (retrieval/separation.py: neighbouring vs random rows of the agent), which tells a
corpus whose rows are all on one topic from one of many topics; neither that nor a
self-retrieval proxy tells a weak model from a good one on the same rows (on LoCoMo the
bundled USE model and e5 score alike by Youden's J although their best α differ:
benchmarks/rounds/2026-12-03-moved-from-code.md).
"""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime
from typing import Any

import numpy as np

from cpersona.calibration import fused, growth, startup
from cpersona.calibration.ports import IndexAccess, VectorSpace
from cpersona.calibration.precision import Request, parse_request
from cpersona.calibration.state import CalibrationState, Fingerprint, _put
from cpersona.calibration.stats import (
    pair_similarities,
    rounded,
    separation_search,
    sessions,
    summary,
    temporal_positives,
)
from cpersona.config import Settings
from cpersona.policy.pause import Pause
from cpersona.storage import Database
from cpersona.storage.codec import from_blob
from cpersona.storage.meta import VectorState
from cpersona.util.time import parse_ts

MIN_EMBEDDINGS = fused.MIN_EMBEDDINGS
MIN_SESSIONS = 3
MIN_POSITIVE_PAIRS = 10
#: The largest |z| recorded (sidecar.Z_RANGE bounds what a file may hold).
Z_MAX = 100.0
#: calibrate_threshold's note in cc mode (state.CalibrationState.fused_signal says why).
CC_NOTE = ("recall mode cc gates each row on its own cosine (against this threshold, placed in each question's "
           "cosines) and its share of the question's words; it has no fused gate")


class Calibration(CalibrationState):
    """Calibration of one process (`engine.calibration`). Thread-safe.

    Args:
        settings, db: configuration and the database of the vectors.
        vectors: the embedding side (model identity, dimension, a probe).
        indexes: the resident vector indexes (for the fused gate's ranking).
        pause: while paused, startup calibration is applied in memory only.
    """

    def __init__(self, settings: Settings, db: Database, vectors: VectorSpace, indexes: IndexAccess,
                 pause: Pause) -> None:
        super().__init__(settings, db, vectors)
        self.indexes = indexes
        self.pause = pause
        self._run_lock = threading.Lock()
        self._stop = threading.Event()
        #: set once the startup guard has done what its plan said (the watch goes on after it)
        self.startup_done = threading.Event()
        self._thread: threading.Thread | None = None

    # --------------------------------------------------------------- sampling
    def dim(self) -> int | None:
        """The active dimension: the backend's, else the stored vectors'."""
        if self.vectors.dim is not None:
            return self.vectors.dim
        fp = self.current_fingerprint()
        return fp.dim if fp else None

    def _stale(self) -> tuple[int, int]:
        return (self.vectors.current_state() or VectorState()).stale_range("memories")

    def _sample(self, agent: str | None, n: int, dim: int, seed: str) -> tuple[list[int], np.ndarray, int]:
        """Up to n random memories of `agent` (None = all) embedded by the active model, and
        how many such memories there are."""
        with self.db.read() as s:
            ids = s.vectors.embedded_memory_ids(dim, self._stale(), agent)
            total = len(ids)
            if len(ids) > n:
                ids = sorted(random.Random(f"{seed}:{len(ids)}").sample(ids, n))
            vectors = _decode(s.vectors.memory_blobs(ids))
        keep = [i for i in ids if i in vectors]
        return keep, (np.stack([vectors[i] for i in keep]) if keep else np.zeros((0, dim), np.float32)), total

    def _newest(self, agent: str | None, n: int, dim: int) -> tuple[np.ndarray, list[datetime]]:
        """The n embedded rows with the greatest timestamp, sorted by time."""
        with self.db.read() as s:
            rows = s.vectors.newest_memories(dim, self._stale(), agent, n)
            vectors = _decode(s.vectors.memory_blobs([r[0] for r in rows]))
        parsed = sorted((ts, i) for i, raw in rows if (ts := parse_ts(raw)) is not None and i in vectors)
        if not parsed:
            return np.zeros((0, dim), np.float32), []
        return np.stack([vectors[i] for _, i in parsed]), [t for t, _ in parsed]

    # ------------------------------------------------------------ calibrate
    def calibrate(self, agent_id: Any, sample_size: Any = 0, z_factor: Any = 0, method: Any = "",
                  percentile: Any = 0, persist: bool = True) -> dict[str, Any]:
        """calibrate_threshold. Raises InvalidArgument for bad arguments; returns
        {ok: false, error} when the corpus cannot be calibrated."""
        req = parse_request(self.settings, agent_id, sample_size, z_factor, method, percentile)
        with self._run_lock:
            return self.run(req, persist)

    def _fail(self, req: Request, error: str, **extra: Any) -> dict[str, Any]:
        if req.agent_id:
            with self.lock:
                self.failures[req.agent_id] = f"calibration failed: {error}"
        return {"ok": False, "error": error, "agent_id": req.agent_id, "method": req.method, **extra}

    def run(self, req: Request, persist: bool) -> dict[str, Any]:
        """One calibration (the caller holds the run lock): vector threshold, then fused gate."""
        if self.vectors.model_id is None:
            return self._fail(req, "embeddings are disabled (CPERSONA_EMBEDDING_MODE=none): there are no vectors to "
                                   "calibrate; recall uses the heuristic gate")
        dim = self.dim()
        if dim is None:
            return self._fail(req, "the embedding dimension is not known yet (the backend has not answered); retry "
                                   "shortly")
        agent = req.agent_id or None
        ids, vectors, total = self._sample(agent, req.sample_size, dim, f"{req.agent_id}")
        if len(ids) < MIN_EMBEDDINGS <= total:  # the caller's sample_size, not the store, is short
            return {"ok": False, "error": f"sample_size: {req.sample_size} is below the {MIN_EMBEDDINGS} embeddings a "
                    f"calibration needs (this scope has {total}); ask for at least {MIN_EMBEDDINGS} or leave it out",
                    "agent_id": req.agent_id, "method": req.method, "sampled_embeddings": len(ids)}
        if len(ids) < MIN_EMBEDDINGS:
            return self._fail(req, f"need at least {MIN_EMBEDDINGS} embeddings of the active model ({dim}-d), found "
                                   f"{len(ids)}", sampled_embeddings=len(ids))
        out, threshold, temporal_ok = self._vector_threshold(req, ids, vectors, dim)
        self._note_rows(req, total)
        if agent and self.settings.fused_gate_enabled and self.active_signal() == "cc":
            out.update(fused_gate=None, fused_gate_note=CC_NOTE)
        elif agent and self.settings.fused_gate_enabled:
            self._apply_fused(req.agent_id, threshold, temporal_ok, dim, out)
        if persist:
            error = self.persist()
            out["sidecar_persisted"] = not error
            if error:
                out["sidecar_error"] = error
        else:
            out["sidecar_persisted"] = False
        return out

    def _vector_threshold(self, req: Request, ids: list[int], vectors: np.ndarray,
                          dim: int) -> tuple[dict[str, Any], float, bool]:
        s = self.settings
        agent = req.agent_id or None
        sims, null = pair_similarities(vectors)
        out: dict[str, Any] = {"ok": True, "scope": "per_agent" if agent else "global", "agent_id": req.agent_id,
                               "sampled_embeddings": len(ids), "num_pairs": int(null.size), "method": req.method,
                               "z_factor": req.z_factor, "percentile": req.percentile, "embedding_dim": dim}
        fp = self.current_fingerprint() or Fingerprint(self.vectors.model_id, dim)
        out["embedding_model"] = fp.model
        window_s = s.calibrate_temporal_window_min * 60.0
        newest, stamps = self._newest(agent, req.sample_size, dim)
        n_sessions = sessions(stamps, window_s)
        temporal = temporal_positives(newest, stamps, window_s) if n_sessions >= MIN_SESSIONS else np.zeros(0)
        # rows dated close in time that are no more alike than random pairs are no session
        # (facts given arbitrary timestamps): they cannot stand for related rows
        unrelated = temporal.size >= MIN_POSITIVE_PAIRS and float(temporal.mean()) <= float(null.mean())
        temporal_ok = temporal.size >= MIN_POSITIVE_PAIRS and not unrelated
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
            sep = separation_search(null, pos, 1.0, s.calibrate_floor)
            raw = sep.threshold
            out.update(proxy_source=source, youden_j=rounded(sep.youden_j),
                       pos_admit_rate=rounded(float((pos >= sep.threshold).mean())),
                       pos_mean=rounded(float(pos.mean())))
            if source == "nn_fallback":
                why = (f"the timestamps form {n_sessions} session(s), fewer than {MIN_SESSIONS}"
                       if n_sessions < MIN_SESSIONS else
                       f"the {temporal.size} pairs of rows dated within {s.calibrate_temporal_window_min:g} minutes "
                       f"of each other are no more alike than random pairs (mean {temporal.mean():.4f} vs "
                       f"{null.mean():.4f})" if unrelated else
                       f"{temporal.size} pairs of rows share a session, fewer than {MIN_POSITIVE_PAIRS}")
                out["proxy_note"] = f"{why}; positives are nearest-neighbour similarities"
        threshold = round(max(raw, s.calibrate_floor), 4)
        old = self.vector_threshold(req.agent_id) if agent else (
            self.global_threshold if self.global_threshold is not None else s.vector_min_similarity)
        out.update(distribution=summary(null), null_admit_rate=rounded(float((null >= threshold).mean())),
                   old_threshold=rounded(old), new_threshold=threshold)
        sd = float(null.std())
        z = (threshold - float(null.mean())) / sd if sd > 1e-6 else None  # no spread: no z (the raw cut)
        z = z if z is not None and abs(z) <= Z_MAX else None
        with self.lock:
            _put(self.cosine_z, req.agent_id or growth.GLOBAL, z)
            if agent:
                self.thresholds[req.agent_id] = threshold
                self.failures.pop(req.agent_id, None)
                self.removed.discard(req.agent_id)
                self.fresh.add(req.agent_id)  # measured now: kept over an erasure another server recorded before
                self.erased.pop(req.agent_id, None)
            else:
                self.global_threshold = threshold
                self.global_fresh = True
            self.fingerprint = fp
            self.calibrated_at = datetime.now(UTC).isoformat()
        return out, threshold, temporal_ok

    def _note_rows(self, req: Request, total: int) -> None:
        """Remember the rows a default-request calibration was measured on (the server
        measures it again once they double: calibration/growth.py); a calibration with the
        caller's own arguments is left as the caller made it."""
        key = req.agent_id or growth.GLOBAL
        with self.lock:
            if req == parse_request(self.settings, req.agent_id):
                self.calibrated_rows[key] = total
            else:
                self.calibrated_rows.pop(key, None)

    def _apply_fused(self, agent_id: str, threshold: float, temporal_ok: bool, dim: int, out: dict[str, Any]) -> None:
        result = self._fused_gate(agent_id, threshold, temporal_ok, dim)
        with self.lock:
            if "kept_heuristic" in result:
                out.update(fused_gate=None, fused_gate_note=result["kept_heuristic"],
                           fused_gate_measured=result["measured"])
                self.gates.pop(agent_id, None)
                self.signal = result["measured"]["signal"]  # measured on it: not "never calibrated"
            elif "error" in result:
                out.update(fused_gate=None, fused_gate_error=result["error"])
                self.gates.pop(agent_id, None)
                self.failures[agent_id] = f"fused-gate calibration failed ({result['error']}); heuristic gate in use"
            else:
                out["fused_gate"] = result
                self.gates[agent_id] = result["threshold"]
                self.signal = result["signal"]

    def _fused_gate(self, agent_id: str, vector_threshold: float, temporal: bool, dim: int) -> dict[str, Any]:
        signal = self.active_signal()
        if signal is None:
            return {"error": "recall mode cascade without confidence scoring has no fused score to gate"}
        indexes = self.indexes.current()
        if indexes is None:
            return {"error": "vector index unavailable (embedding dimension unknown)"}
        job = fused.FusedJob(self.settings, self.db, indexes, dim, self._stale(), agent_id, vector_threshold,
                             self.beta(agent_id), signal, temporal)
        return fused.calibrate(job, self._stop.is_set)

    # ---------------------------------------------------------------- agents
    def forget_agent(self, agent_id: str) -> int:
        """Drop the agent's threshold, gate and β (delete_agent_data); persisted unless
        paused; waits for a calibration running now. Returns how many entries were removed."""
        with self._run_lock:  # a calibration of the agent running now would write it back afterwards
            dropped = self.drop_agent(agent_id)
            if not self.pause.active():  # also when only another server's entry of the agent is in the file
                self.persist()
        return dropped

    def status(self, agent_id: str) -> dict[str, Any]:
        """CalibrationState.status plus `follows_corpus`: the agent's embedded rows now, the
        rows its calibration was measured on (None: not calibrated by the server, or with
        the caller's own arguments) and whether the server is about to calibrate it again
        (calibration/growth.py; only while it calibrates by itself)."""
        out = super().status(agent_id)
        dim = self.dim()
        found = startup.counts(self, dim) if dim is not None else {}  # one GROUP BY for both fields
        auto = self.settings.calibrate_on_model_change or self.settings.auto_calibrate
        with self.lock:
            measured = self.calibrated_rows.get(agent_id)
        due = auto and dim is not None and bool({agent_id, growth.GLOBAL} & set(startup.due(self, found)))
        out["follows_corpus"] = {"enabled": auto, "rows": found.get(agent_id, 0), "calibrated_rows": measured,
                                 "min_rows": self.settings.calibrate_min_rows, "due": due}
        return out

    # --------------------------------------------------------------- startup
    def start(self) -> None:
        """Run the startup recalibration in a background thread (only with a backend)."""
        if self.vectors.model_id is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=startup.run, args=(self,), name="cpersona-calibration", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self, seconds: float) -> None:
        self._stop.wait(seconds)


def _decode(blobs: dict[int, bytes]) -> dict[int, np.ndarray]:
    out = {}
    for row_id, blob in blobs.items():
        vec = from_blob(blob)
        if vec is not None:
            out[row_id] = vec
    return out
