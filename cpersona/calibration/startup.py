"""The startup recalibration (a background thread; never blocks the MCP handshake; only
with an embedding backend).

A fresh sidecar was already restored by `CalibrationState`. A stale, corrupt or lost one —
or none at all on a corpus with vectors — triggers a recalibration of the global threshold
(when the store holds CPERSONA_CALIBRATE_MIN_ROWS embedded rows) and of every agent owning
that many memories embedded by the active model (CPERSONA_CALIBRATE_ON_MODEL_CHANGE, default
on; CPERSONA_AUTO_CALIBRATE recalibrates at every start). Until it lands recall uses the
heuristic gate and says so in its `gate` field; a failure is reported the same way, never
swallowed. Afterwards the same thread keeps the calibration in step with the corpus
(calibration/growth.py) while either setting is on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from cpersona.calibration import growth, sidecar
from cpersona.calibration.records import Fingerprint, Startup
from cpersona.calibration.sync import Shared
from cpersona.config import Settings
from cpersona.policy.pause import Pause
from cpersona.storage import Database
from cpersona.storage.meta import VectorState

log = logging.getLogger(__name__)

#: Seconds to wait for an HTTP backend to reveal its dimension.
DIM_TIMEOUT = 120.0
#: Seconds between looks at the re-embedding while the recalibration waits for it.
VECTORS_POLL = 0.5
_RECALIBRATED = {"stale": "recalibrated", "corrupt": "recalibrated_corrupt", "lost": "recalibrated_lost"}


class Calibration(Shared, Protocol):
    """What the startup thread drives (calibration/runner.py: `Calibration`): the state
    (`Shared`) and its measurements."""

    settings: Settings
    db: Database
    pause: Pause
    loaded: sidecar.Loaded
    startup: Startup
    startup_done: threading.Event

    def fused_signal(self) -> str | None: ...

    def current_fingerprint(self) -> Fingerprint | None: ...

    def dim(self) -> int | None: ...

    def calibrate(self, agent_id: Any, *, persist: bool = True) -> dict[str, Any]: ...

    def persist(self) -> str: ...

    def stopping(self) -> bool: ...

    def wait(self, seconds: float) -> None: ...


def plan(cal: Calibration) -> str:
    """What this start does: restored | noop | gate_calibrated | recalibrated* | auto | initial."""
    s = cal.settings
    state = cal.sidecar_state
    if state == "ok" and not s.auto_calibrate:
        if s.fused_gate_enabled and cal.thresholds and cal.fused_signal() not in (None, cal.signal):
            return "gate_calibrated"
        return "restored"
    changed = state in ("absent", "lost", "corrupt", "stale")
    if not (s.auto_calibrate or (s.calibrate_on_model_change and changed)):
        return "noop"
    return _RECALIBRATED.get(state, "auto" if s.auto_calibrate else "initial")


def _revalidate(cal: Calibration) -> None:
    """A sidecar restored at construction was compared with the model the database
    RECORDED then; this start may decide on another one (a model change, an original's
    database whose vectors carry no model). Once the backend has answered — the identity is
    decided by then — a sidecar that no longer matches is treated as stale on THIS start."""
    if cal.sidecar_state != "ok" or _wait_dim(cal) is None:
        return
    _wait_identity(cal)
    reason = cal.stale_reason(cal.loaded.data)
    if reason:
        cal.sidecar_state = "stale"
        cal.problem = f"calibration file is stale: {reason}"


def run(cal: Calibration) -> None:
    """The thread body: plan, then recalibrate what the plan says (progress in
    `cal.startup`); then follow the corpus while the server calibrates by itself."""
    _revalidate(cal)
    action = plan(cal)
    cal.startup.action = action
    if action == "noop" and cal.sidecar_state == "stale":
        log.warning("%s; stale gates are not applied (CPERSONA_CALIBRATE_ON_MODEL_CHANGE=false)", cal.problem)
    if action not in ("restored", "noop"):
        _guarded(cal, "startup calibration", lambda: _recalibrate(cal, action))
        cal.startup.finished_at = datetime.now(UTC).isoformat()
    cal.startup_done.set()
    if cal.settings.calibrate_on_model_change or cal.settings.auto_calibrate:
        while not cal.stopping():
            cal.wait(growth.WATCH_S)
            if not cal.stopping():
                _guarded(cal, "recalibration of a grown corpus", lambda: follow(cal))


def _guarded(cal: Calibration, what: str, job: Callable[[], None]) -> None:
    """Run `job` with `cal.startup.running` set; a failure is logged and kept in
    `cal.startup.error` (shown by get_recall_precision and the recall notice)."""
    cal.startup.running = True
    try:
        job()
    except Exception as err:  # noqa: BLE001 — reported through status() and the recall notice
        log.warning("%s failed: %s", what, err)
        cal.startup.error = f"{what} failed: {type(err).__name__}: {err}"
        if cal.problem:
            cal.problem += f"; {what} failed: {err}"
    finally:
        cal.startup.running = False


def counts(cal: Calibration, dim: int) -> dict[str, int]:
    """Embedded rows of the active model per agent, and over all agents (`growth.GLOBAL`)."""
    stale = (cal.vectors.current_state() or VectorState()).stale_range("memories")
    with cal.db.read() as s:
        per_agent = s.vectors.embedded_counts(dim, stale, 1)
    return {**per_agent, growth.GLOBAL: sum(per_agent.values())}  # an agent named "" is counted, not calibrated


def due(cal: Calibration, found: dict[str, int] | None = None) -> list[str]:
    """What the watch would calibrate now ([] while the vectors are being replaced, without
    a dimension, or while writes are paused); `found`: `counts` when the caller has them."""
    dim = cal.dim()
    if dim is None or cal.current_fingerprint() is None or cal.pause.active():
        return []
    with cal.lock:
        calibrated = set(cal.thresholds) | ({growth.GLOBAL} if cal.global_threshold is not None else set())
        rows = dict(cal.calibrated_rows)
    found = found if found is not None else counts(cal, dim)
    return growth.due(found, rows, calibrated, cal.settings.calibrate_min_rows)


def follow(cal: Calibration) -> None:
    """Calibrate what `due` names — the global threshold first — and persist (unless paused)."""
    keys = due(cal)
    done = 0
    for key in keys:
        if cal.stopping():
            return
        done += bool(cal.calibrate(key, persist=False).get("ok"))
    if keys and not cal.pause.active():
        cal.startup.error = cal.persist()
    cal.startup.grown += done


def _recalibrate(cal: Calibration, action: str) -> None:
    dim = _wait_dim(cal)
    if dim is None:
        if cal.stopping():
            return
        raise RuntimeError("embedding dimension unknown (backend not answering)")
    if not _wait_current_vectors(cal):
        return
    cal.startup.action = action
    if cal.sidecar_state in ("stale", "corrupt") and cal.store is not None:
        loaded = cal.loaded
        cal.store.backup((loaded.data or {}).get("scoring_version") if loaded.status == "ok" else "corrupt")
    minimum = cal.settings.calibrate_min_rows
    found = counts(cal, dim)
    agents = sorted(a for a, n in found.items() if a != growth.GLOBAL and n >= minimum)
    if not agents and found[growth.GLOBAL] < minimum:
        cal.startup.action = "noop"  # too few rows yet: the watch calibrates them once they are there
        return
    if action != "gate_calibrated" and found[growth.GLOBAL] >= minimum:
        res = cal.calibrate("", persist=False)
        if not res.get("ok"):
            raise RuntimeError(res.get("error"))
    done = 0
    for agent in agents:
        if cal.stopping():
            return
        done += bool(cal.calibrate(agent, persist=False).get("ok"))
    error = "persistence paused: calibration applied in memory only" if cal.pause.active() else cal.persist()
    cal.startup.agents = done
    cal.startup.error = error
    cal.problem = ""


def _wait_current_vectors(cal: Calibration) -> bool:
    """Wait until the stored vectors are the active model's: its identity decided, no
    re-embedding pending and (with the task queue on) no row waiting for its vector — so a
    model change or an original's database found at start is recalibrated on THIS start,
    on the new model's vectors. False when the process stops first."""
    while not cal.stopping():
        if cal.current_fingerprint() is not None:
            if not cal.settings.task_queue_enabled:
                return True
            with cal.db.read() as s:
                if s.tasks.count_pending() == 0:
                    return True
        cal.startup.action = "waiting_for_vectors"
        cal.wait(VECTORS_POLL)
    return False


def _wait_identity(cal: Calibration) -> None:
    """Until this process has decided the stored vectors' identity (the gateway reconciles
    the database's record with the backend right after the backend's first answer): before
    that, the record may still name the previous model, and a sidecar measured with it would
    pass for current (a race seen in about 4 of 10 starts after a model change). Bounded by
    DIM_TIMEOUT; afterwards the database's record is used as before."""
    deadline = time.monotonic() + DIM_TIMEOUT
    while cal.vectors.current_state() is None and not cal.stopping() and time.monotonic() < deadline:
        cal.wait(0.05)


def _wait_dim(cal: Calibration) -> int | None:
    """The backend's dimension (an HTTP backend learns it from its first answer: the vector
    index and the fused-gate queries need it)."""
    deadline = time.monotonic() + DIM_TIMEOUT
    while not cal.stopping():
        if cal.vectors.dim is not None:
            return cal.vectors.dim
        if cal.vectors.embed_texts(["calibration probe"]) is not None:
            continue
        if time.monotonic() > deadline:
            return None
        cal.wait(1.0)
    return None
