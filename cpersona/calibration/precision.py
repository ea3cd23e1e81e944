"""Arguments of the calibration tools, and the precision (β) operating points.

Precision: β = CPERSONA_FUSED_GATE_BETA if > 0, else strict 2.0 / balanced 1.0 / lenient
0.5 (CPERSONA_RECALL_PRECISION); `set_recall_precision` overrides it per agent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cpersona.config import Settings
from cpersona.errors import InvalidArgument
from cpersona.policy import validate

METHODS = ("separation", "percentile", "zscore")
PRECISIONS = {"strict": 2.0, "balanced": 1.0, "lenient": 0.5}
MAX_Z = 10.0


@dataclass(frozen=True)
class Request:
    """Validated arguments of calibrate_threshold."""

    agent_id: str
    sample_size: int
    z_factor: float
    method: str
    percentile: float


def _number(argument: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgument(argument, f"must be a finite number, got {value!r}")
    return float(value)


def parse_request(settings: Settings, agent_id: Any, sample_size: Any = 0, z_factor: Any = 0, method: Any = "",
                  percentile: Any = 0) -> Request:
    """Validate calibrate_threshold's arguments (0 / '' = the CPERSONA_CALIBRATE_* default).

    sample_size: an integer, clamped to 1..CALIBRATE_MAX_SAMPLE (0 = the default); z_factor:
    a number, clamped to −10..10 (both clamped as the original CPersona clamps them);
    percentile: (0, 1], or a percent in (1, 100]; method: separation | percentile | zscore.
    """
    agent = validate.identifier("agent_id", agent_id)
    cap = settings.calibrate_max_sample
    if isinstance(sample_size, bool) or not isinstance(sample_size, int):
        raise InvalidArgument("sample_size", f"must be an integer, got {type(sample_size).__name__}")
    n = min(max(sample_size or settings.calibrate_sample_size, 1), cap)
    z = min(max(_number("z_factor", z_factor), -MAX_Z), MAX_Z)
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


def resolve_precision(settings: Settings, precision: Any, beta: Any) -> tuple[float | None, str]:
    """(β, label) for set_recall_precision; (None, 'default') clears the override."""
    if not isinstance(precision, str):
        raise InvalidArgument("precision", f"must be a string, got {type(precision).__name__}")
    b = _number("beta", beta)
    if b > 100:
        raise InvalidArgument("beta", f"must be at most 100 (≤ 0 = use precision), got {b:g}")
    if b > 0:
        return b, label_for(b)
    name = precision.strip().lower()
    if not name:
        return None, "default"
    if name not in PRECISIONS:
        raise InvalidArgument("precision",
                              f"must be one of strict, balanced, lenient (or pass beta > 0); got {precision!r}")
    return PRECISIONS[name], name


def label_for(beta: float) -> str:
    """"strict" / "balanced" / "lenient" for their β, else "custom"."""
    for name, value in PRECISIONS.items():
        if abs(value - beta) < 1e-9:
            return name
    return "custom"


def global_beta(settings: Settings) -> float:
    """The server-wide default β."""
    return settings.fused_gate_beta if settings.fused_gate_beta > 0 else PRECISIONS.get(settings.recall_precision, 1.0)
