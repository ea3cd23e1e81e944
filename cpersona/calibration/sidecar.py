"""The calibration sidecar `<CPERSONA_DB_PATH>.calibration.json`.

Calibration state lives beside the database, not in it: per-agent vector thresholds,
fused-gate thresholds and precision overrides (β). The file is written atomically —
`<path>.tmp.<pid>` is written, fsynced and renamed over the old file (then the folder is
fsynced) — so a crash leaves the old or the new file, never half of one.

Fingerprint: `scoring_version`, `embedding_model`, `embedding_dim` and `fused_gate_signal`
say what the numbers were measured with. A file whose fingerprint differs from the running
process is STALE: its thresholds are never applied (see `calibration/state.py`).

Unlike the earlier system, a lost or unreadable file is never silent: `load` reports
`absent` / `corrupt` with the reason, and the database records (in `cpersona_meta`, key
`calibration`) that a sidecar was written, so a database restored without its sidecar is
recognised as `lost` rather than "never calibrated".
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cpersona.storage import Session
from cpersona.storage.meta import CALIBRATION_KEY
from cpersona.util.files import fsync_dir

FORMAT = 1
SUFFIX = ".calibration.json"
#: Backups kept before a staleness-triggered recalibration.
MAX_BACKUPS = 5

#: The range of every number the file may hold; a value outside it cannot have been
#: measured (a damaged or hand-edited file) and makes the whole file corrupt, never applied.
#: Vector thresholds are cosines, in [-1, 1]. β is what set_recall_precision accepts,
#: (0, 100]. A fused gate lies in the range of the signal it was measured on
#: (retrieval/gate.py): cosine and cc (α·cosine + (1 − α)·lexical) in [-1, 1], rsf and
#: confidence in [0, 1], rrf in [0, 150] (3 channels × the largest weight 100 / (k + 1 ≥ 2)).
SIGNAL_RANGES = {"cosine": (-1.0, 1.0), "cc": (-1.0, 2.0), "rsf": (0.0, 1.0), "confidence": (0.0, 1.0),
                 "rrf": (0.0, 150.0)}
THRESHOLD_RANGE = (-1.0, 1.0)
BETA_RANGE = (1e-9, 100.0)
MAX_DIM = 65536

_MAPS = ("agent_thresholds", "agent_fused_gates", "agent_betas", "calibrated_rows", "cosine_z")
#: Rows a calibration was measured on (calibration/growth.py): a count.
ROWS_RANGE = (0.0, 1e12)
#: A threshold's distance from the mean of random pairs, in their standard deviations.
Z_RANGE = (-1000.0, 1000.0)
_NUMBERS = ("global_threshold", "global_fused_gate")
#: Erased agents remembered in the file (`erased_agents`: agent → UTC time), newest kept.
MAX_ERASED = 1000


def path_for(db_file: Path | None) -> Path | None:
    """`<db>.calibration.json`, or None for an in-memory database (nothing persisted)."""
    return None if db_file is None else db_file.with_name(db_file.name + SUFFIX)


@dataclass
class Loaded:
    """Result of reading the sidecar.

    status: "ok" | "absent" | "corrupt"; `data` is the validated payload when ok;
    `error` says why a file was rejected.
    """

    status: str
    data: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _ranges(data: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Each numeric key → its allowed range (fused gates by the recorded gate signal)."""
    signal = data.get("fused_gate_signal")
    gate = SIGNAL_RANGES.get(signal) if isinstance(signal, str) else None
    gate = gate or (min(r[0] for r in SIGNAL_RANGES.values()), max(r[1] for r in SIGNAL_RANGES.values()))
    return {"agent_thresholds": THRESHOLD_RANGE, "global_threshold": THRESHOLD_RANGE,
            "agent_fused_gates": gate, "global_fused_gate": gate, "agent_betas": BETA_RANGE,
            "calibrated_rows": ROWS_RANGE, "cosine_z": Z_RANGE}


def _out_of_range(key: str, value: Any, bounds: tuple[float, float]) -> str:
    if not _finite(value):
        return f"{key} is not a finite number"
    if not bounds[0] <= value <= bounds[1]:
        return f"{key} = {value:g} is outside [{bounds[0]:g}, {bounds[1]:g}]"
    return ""


def validate(data: Any) -> str:
    """'' when `data` has the sidecar shape and every number is within its range, else the
    first problem found."""
    if not isinstance(data, dict):
        return "top level is not a JSON object"
    for key in ("embedding_model", "scoring_version", "fused_gate_signal", "calibrated_at"):
        if data.get(key) is not None and not isinstance(data.get(key), str):
            return f"{key} is not a string"
    if data.get("fused_gate_signal") not in (None, *SIGNAL_RANGES):
        return f"fused_gate_signal {data['fused_gate_signal']!r} is not a gate signal"
    ranges = _ranges(data)
    for key in _MAPS:
        value = data.get(key, {})
        if not isinstance(value, dict):
            return f"{key} is not an object"
        for agent, number in value.items():
            if problem := _out_of_range(f"{key}[{agent!r}]", number, ranges[key]):
                return problem
    for key in _NUMBERS:
        value = data.get(key)
        if value is not None and (problem := _out_of_range(key, value, ranges[key])):
            return problem
    erased = data.get("erased_agents", {})
    if not isinstance(erased, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in erased.items()):
        return "erased_agents is not an object of agent → time"
    dim = data.get("embedding_dim")
    if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool) or not 0 < dim <= MAX_DIM):
        return f"embedding_dim is not an integer in [1, {MAX_DIM}]"
    return ""


def load(path: Path | None) -> Loaded:
    """Read and validate the sidecar. Never raises."""
    if path is None or not path.exists():
        return Loaded("absent")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        return Loaded("corrupt", error=f"{type(err).__name__}: {err}")
    problem = validate(data)
    if problem:
        return Loaded("corrupt", error=problem)
    return Loaded("ok", data)


def write_atomic(path: Path, payload: dict[str, Any]) -> str:
    """Write `payload` as JSON atomically. Returns '' on success, else the error text."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        data = json.dumps(payload, ensure_ascii=False, indent=1, sort_keys=True, allow_nan=False)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except (OSError, ValueError, TypeError) as err:
        try:
            tmp.unlink()
        except OSError:
            pass
        return f"{type(err).__name__}: {err}"
    return ""


def backup(path: Path, old_version: str | None) -> Path | None:
    """Copy the sidecar to `<sidecar>.before-<old version>-<UTC stamp>` before a
    staleness-triggered recalibration: at most one per old version, newest MAX_BACKUPS kept."""
    if not path.exists():
        return None
    label = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in (old_version or "unversioned"))
    prefix = f"{path.name}.before-{label}-"
    if any(p.name.startswith(prefix) for p in path.parent.iterdir()):
        return None
    target = path.with_name(prefix + datetime.now(UTC).strftime("%Y%m%d-%H%M%S"))
    try:
        target.write_bytes(path.read_bytes())
    except OSError:
        return None
    olds = sorted((p for p in path.parent.iterdir() if p.name.startswith(f"{path.name}.before-")),
                  key=lambda p: p.stat().st_mtime)
    for stale in olds[:-MAX_BACKUPS]:
        try:
            stale.unlink()
        except OSError:
            pass
    return target


# ------------------------------------------------------- record in the database
def record_written(session: Session, path: Path, calibrated_at: str) -> None:
    """Note in the database that a sidecar exists (write transaction)."""
    session.meta.put(CALIBRATION_KEY, {"sidecar": path.name, "calibrated_at": calibrated_at})


def recorded(session: Session) -> dict[str, Any] | None:
    """What `record_written` stored, or None when no sidecar was ever written."""
    value = session.meta.get(CALIBRATION_KEY)
    if value is None:
        return None
    return value if isinstance(value, dict) else {}
