"""A calibration another server on the same store wrote is picked up by this one.

Each server keeps its calibration in memory and writes it to the shared store (the sidecar file
beside a SQLite file, or the record of a shared PostgreSQL database), merging what the store
already holds (`CalibrationState.payload`). A server read the store only at its start, so two
servers on one file answered the same query with different gates until each had calibrated the
agent itself. Now `gate_for` (every recall) asks `StoreWatch.changed` — the store's stamp (the
file's mtime, size and inode; the record's `calibrated_at`), read at most every CHECK_EVERY_S
seconds — and on a change merges the stored state in (`merge`).

What this server changed since its own last save wins: an agent calibrated here (`fresh`) or
purged here (`removed`), the store-wide threshold measured here (`global_fresh`), a β set or
cleared here (`betas_changed`). Everything else is taken from the store — a β it no longer
holds is dropped — as the store is what every server's next save builds on (a save merges the
store in first, so it never writes back an older number of its own over a newer one of another
server's); agents another server erased (`erased_agents`) are dropped here too. A state
measured with other settings or another model (a stale payload) is left alone, as at startup.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from cpersona.calibration import growth
from cpersona.calibration.ports import VectorSpace
from cpersona.calibration.records import Fingerprint
from cpersona.calibration.store import CalibrationStore

#: Seconds between two looks at the store's stamp (a stat of the sidecar file).
CHECK_EVERY_S = 1.0
#: Payload tables of per-agent entries → the state's attribute holding them.
AGENT_TABLES = {"agent_thresholds": "thresholds", "agent_fused_gates": "gates",
                "calibrated_rows": "calibrated_rows", "cosine_z": "cosine_z"}


class StoreWatch:
    """Whether the store changed since this process last read or wrote it."""

    def __init__(self, stamp: Callable[[], Hashable | None], every_s: float = CHECK_EVERY_S) -> None:
        self._stamp = stamp
        self._every = every_s
        self._lock = threading.Lock()
        self._seen = stamp()
        self._next = time.monotonic() + every_s

    def changed(self) -> bool:
        """True (once) when the stamp moved since the last look; looks at most every `every_s`."""
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                return False
            self._next = now + self._every
        stamp = self._stamp()
        with self._lock:
            moved, self._seen = stamp != self._seen, stamp
        return moved and stamp is not None

    def mark(self) -> None:
        """This process just wrote the store: its own write is not a change to pick up."""
        stamp = self._stamp()
        with self._lock:
            self._seen = stamp


class Shared(Protocol):
    """What picking up another server's save reads and writes of the calibration state
    (calibration/state.py: `CalibrationState`)."""

    lock: threading.RLock
    watch: StoreWatch | None
    store: CalibrationStore | None
    vectors: VectorSpace
    fingerprint: Fingerprint | None
    thresholds: dict[str, float]
    gates: dict[str, float]
    betas: dict[str, float]
    calibrated_rows: dict[str, int]
    cosine_z: dict[str, float]
    fresh: set[str]
    removed: set[str]
    betas_changed: set[str]
    global_fresh: bool
    global_threshold: float | None
    global_fused_gate: float | None
    signal: str | None
    calibrated_at: str | None
    problem: str
    sidecar_state: str
    sidecar_error: str

    def stale_reason(self, data: dict[str, Any]) -> str: ...

    def drop_agent(self, agent_id: str, erased_here: bool = True) -> int: ...


def pick_up(state: Shared) -> None:
    """Merge what another server saved since this one last looked (a no-op between looks, and
    without vectors)."""
    if state.watch is None or state.store is None or state.vectors.model_id is None or not state.watch.changed():
        return
    loaded = state.store.load()
    if loaded.status == "ok" and merge(state, loaded.data) and state.fingerprint is None:
        state.fingerprint = Fingerprint(loaded.data.get("embedding_model"), loaded.data.get("embedding_dim"))


def merge(state: Shared, data: dict[str, Any]) -> bool:
    """Apply the stored payload `data` to `state` (module doc); False when it is stale here."""
    if state.stale_reason(data):
        return False
    erased = [a for a in data.get("erased_agents", {}) if a not in state.fresh]
    for agent in erased:
        state.drop_agent(agent, erased_here=False)
    with state.lock:
        mine = state.fresh | state.removed
        for key, attr in AGENT_TABLES.items():
            table = getattr(state, attr)
            for agent, value in data.get(key, {}).items():
                if agent not in mine and agent not in erased and agent != growth.GLOBAL:
                    table[agent] = value
        stored, set_here = data.get("agent_betas", {}), state.betas_changed | state.removed
        for agent in [a for a in state.betas if a not in stored and a not in set_here]:
            del state.betas[agent]  # cleared by another server
        for agent, beta in stored.items():
            if agent not in set_here and agent not in erased:
                state.betas[agent] = float(beta)
        if data.get("global_threshold") is not None and not state.global_fresh:
            _take_global(state, data)
        if state.signal is None:
            state.signal = data.get("fused_gate_signal")
        state.calibrated_at = max(state.calibrated_at or "", data.get("calibrated_at") or "") or None
        state.problem, state.sidecar_state, state.sidecar_error = "", "ok", ""
    return True


def _take_global(state: Shared, data: dict[str, Any]) -> None:
    """The store-wide threshold and fused gate the store holds (not measured here since the last save)."""
    state.global_threshold = data.get("global_threshold")
    state.global_fused_gate = data.get("global_fused_gate")
    state.signal = data.get("fused_gate_signal")
    for key, attr in (("calibrated_rows", "calibrated_rows"), ("cosine_z", "cosine_z")):
        value = data.get(key, {}).get(growth.GLOBAL)
        table = getattr(state, attr)
        if value is None:
            table.pop(growth.GLOBAL, None)
        else:
            table[growth.GLOBAL] = value
