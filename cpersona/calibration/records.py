"""The small records of the calibration state (calibration/state.py): what calibrated numbers
were measured with (`Fingerprint`, `scoring_version`), the startup recalibration's progress
(`Startup`), an agent's precision state before a change (`BetaSnapshot`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cpersona.config import Settings

#: Fingerprint of the scoring functions the gates were measured with; bump on any change
#: to fusion, penalties, confidence or the gate rules (a mismatch makes the sidecar stale).
SCORING_VERSION = "cpersona-q8-answer-unit"


def scoring_version(settings: Settings) -> str:
    """SCORING_VERSION plus the settings that change the scores the gates key on (fusion
    mode, cc α, the neighbour weight), e.g. "cpersona-q8-answer-unit/cc/alpha=auto/nb=auto":
    changing any makes a sidecar stale."""
    alpha = "auto" if settings.cc_alpha is None else f"{settings.cc_alpha:g}"
    nb = "auto" if settings.neighbour_weight is None else f"{settings.neighbour_weight:g}"
    return f"{SCORING_VERSION}/{settings.recall_mode}/alpha={alpha}/nb={nb}"


@dataclass
class Fingerprint:
    """What calibrated numbers were measured with."""

    model: str | None
    dim: int | None
    scoring_version: str = SCORING_VERSION

    def describe(self) -> str:
        return f"model {self.model or '?'} ({self.dim or '?'}-d), scoring {self.scoring_version}"


@dataclass
class Startup:
    """Progress of the startup recalibration (shown by get_recall_precision)."""

    action: str = "pending"
    running: bool = False
    error: str = ""
    finished_at: str = ""
    agents: int = 0
    #: calibrations made since the start because an agent's rows doubled (calibration/growth.py)
    grown: int = 0


@dataclass(frozen=True)
class BetaSnapshot:
    """An agent's precision state before `set_beta`: its β override (None = none), whether
    it was explicitly cleared, and its calibration failure note."""

    beta: float | None
    cleared: bool
    failure: str | None


def _put(table: dict[str, Any], key: str, value: Any) -> None:
    """table[key] = value, or drop the key when value is None."""
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value
