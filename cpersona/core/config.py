"""Settings from CPERSONA_* environment variables (spec operations.md §1).

Every setting is one row of `SETTINGS`: variable name, type, default, bounds and the
unprefixed alias (EMBEDDING_MODE, …) where the spec names one; the prefixed form wins when
both are set and non-empty. A malformed value raises `ConfigError` naming the variable and
the expected form — startup stops with that one line rather than guessing a default.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from pydantic import BaseModel, ConfigDict, create_model


class ConfigError(ValueError):
    """A CPERSONA_* variable is malformed. `str(err)` is a single line fit for users."""


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _parse_bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError("expected true or false")


def _parse_int(raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError("expected an integer") from None


def _parse_float(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError("expected a number") from None
    if not math.isfinite(value):
        raise ValueError("expected a finite number")
    return value


def _parse_str(raw: str) -> str:
    return raw.strip()


_PARSERS: dict[type, Callable[[str], Any]] = {bool: _parse_bool, int: _parse_int, float: _parse_float, str: _parse_str}


@dataclass(frozen=True)
class Setting:
    """One environment variable: `field` in `Settings`, its type, default and rules."""

    field: str
    kind: type
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    alias: str | None = None

    @property
    def env(self) -> str:
        return "CPERSONA_" + self.field.upper()

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        form = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[self.kind]
        if self.minimum is not None and self.maximum is not None:
            return f"{form} in [{self._num(self.minimum)}, {self._num(self.maximum)}]"
        if self.minimum is not None:
            return f"{form} >= {self._num(self.minimum)}"
        return form

    def _num(self, value: float) -> str:
        return str(int(value)) if self.kind is int else f"{value:g}"

    def parse(self, raw: str) -> Any:
        """Convert `raw`; raises ValueError(describe()) when it breaks the rule."""
        try:
            value = _PARSERS[self.kind](raw)
        except ValueError:
            raise ValueError(self.describe()) from None
        if self.choices and value.lower() not in self.choices:
            raise ValueError(self.describe())
        if self.choices:
            value = value.lower()
        too_low = self.minimum is not None and value < self.minimum
        too_high = self.maximum is not None and value > self.maximum
        if too_low or too_high:
            raise ValueError(self.describe())
        return value


S = Setting
#: Every supported variable (spec operations.md §1, plus the bundled-model settings of ours).
SETTINGS: tuple[Setting, ...] = (
    # storage
    S("db_path", str, "data/cpersona.db"),
    S("fts_enabled", bool, True),
    S("max_content_length", int, 16000, 1, 10_000_000),
    S("max_profile_length", int, 2000, 1, 1_000_000),
    S("max_metadata_length", int, 8000, 2, 1_000_000),
    # embeddings
    S("embedding_mode", str, "auto", choices=("auto", "none", "http", "local"), alias="EMBEDDING_MODE"),
    S("embedding_url", str, "", alias="EMBEDDING_HTTP_URL"),
    S("local_model", str, "use", choices=("use", "e5")),
    S("embedding_model", str, "", alias="EMBEDDING_MODEL"),
    S("embedding_threads", int, 1, 1, 64),
    S("embedding_timeout_secs", float, 30.0, 0.1, 600),
    S("embedding_cache_size", int, 256, 0, 1_000_000),
    S("embedding_cache_ttl", float, 300.0, 0, 86400 * 365),
    S("degraded_advisory", bool, True),
    S("task_retry_delay", float, 30.0, 0.05, 86400),
    # background task queue and operating context (issue 5)
    S("task_queue_enabled", bool, True),
    S("task_max_retries", int, 3, 1, 1000),
    S("operating_context", str, "on", choices=("on", "off")),
    S("operating_context_path", str, ""),
    # retrieval
    S("recall_mode", str, "cc", choices=("cc", "rrf", "rsf", "cascade")),
    S("cc_alpha", float, 0.2, 0.0, 1.0),
    S("rrf_k", int, 60, 1, 100_000),
    S("rrf_threshold_factor", float, 0.5, 0.0, 10.0),
    S("vector_weight", float, 1.0, 0.0, 100.0),
    S("max_memories", int, 10000, 1, 10_000_000),
    S("vector_min_similarity", float, 0.3, -1.0, 1.0),
    S("recall_preview_chars", int, 500, 0, 10_000_000),
    S("episode_penalty_enabled", bool, True),
    S("episode_decay_rate", float, 0.01, 0.0, 100.0),
    S("episode_decay_floor", float, 0.5, 0.0, 1.0),
    S("autocut_enabled", bool, True),
    S("autocut_min_gap_ratio", float, 0.15, 0.0, 1.0),
    S("autocut_min_results", int, 3, 2, 1000),
    # recall quality layer (issue 4): gate, confidence, calibration
    S("gate_enabled", bool, True),
    S("confidence_enabled", bool, False),
    S("cosine_floor", float, 0.20, -1.0, 1.0),
    S("cosine_ceil", float, 0.75, -1.0, 1.0),
    S("decay_rate", float, 0.005, 0.0, 100.0),
    S("decay_floor", float, 0.3, 0.0, 1.0),
    S("decay_ceil", float, 0.5, 0.0, 1.0),
    S("recall_boost", float, 0.02, 0.0, 10.0),
    S("boost_decay_rate", float, 0.002, 0.0, 100.0),
    S("min_time_range_hours", float, 24.0, 0.0, 1e7),
    S("reference_hours", float, 168.0, 0.001, 1e7),
    S("resolved_decay_factor", float, 0.3, 0.0, 1.0),
    S("recent_recall_penalty", float, 0.7, 0.0, 1.0),
    S("recent_recall_window_min", float, 5.0, 0.0, 1e6),
    S("fused_gate_enabled", bool, True),
    S("recall_precision", str, "balanced", choices=("strict", "balanced", "lenient")),
    S("fused_gate_beta", float, 0.0, 0.0, 100.0),
    S("fused_gate_sample_queries", int, 40, 1, 1000),
    S("fused_gate_calibration_draws", int, 5, 1, 50),
    S("fused_gate_min_keep", float, 0.9, 0.0, 1.0),
    S("auto_calibrate", bool, False),
    S("calibrate_on_model_change", bool, True),
    S("calibrate_method", str, "separation", choices=("separation", "percentile", "zscore")),
    S("calibrate_sample_size", int, 200, 1, 100_000),
    S("calibrate_max_sample", int, 2000, 1, 20_000),
    S("calibrate_z_factor", float, 1.0, -10.0, 10.0),
    S("calibrate_percentile", float, 0.95, 0.0001, 1.0),
    S("calibrate_floor", float, 0.05, -1.0, 1.0),
    S("calibrate_temporal_window_min", float, 30.0, 0.01, 1e6),
    # transport
    S("transport", str, "stdio", choices=("stdio", "streamable-http")),
    S("http_host", str, "127.0.0.1"),
    S("http_port", int, 8402, 1, 65535),
    S("auth_token", str, ""),
    S("allow_unauthenticated_http", bool, False),
    S("log_level", str, "warning", choices=("debug", "info", "warning", "error")),
)
del S


class _SettingsBase(BaseModel):
    """Resolved configuration. Build with `Settings.from_env()`; one field per `SETTINGS` row."""

    model_config = ConfigDict(frozen=True)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "_SettingsBase":
        """Read every variable of `SETTINGS` from `environ` (default `os.environ`).

        Empty values mean "use the default". `overrides` (field=value) win over the
        environment — tests and the CLI use them.

        Raises:
            ConfigError: "CPERSONA_RRF_K='abc' is invalid: expected an integer >= 1".
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for setting in SETTINGS:
            raw, name = _lookup(env, setting)
            if raw is None:
                continue
            try:
                values[setting.field] = setting.parse(raw)
            except ValueError as err:
                raise ConfigError(f"{name}={raw!r} is invalid: expected {err}") from None
        values.update(overrides)
        return cls(**values)

    @property
    def db_file(self) -> Path | None:
        """Absolute DB path, or None for an in-memory database (":memory:")."""
        if self.db_path == ":memory:":
            return None
        return Path(self.db_path).expanduser().resolve()


def _lookup(env: Mapping[str, str], setting: Setting) -> tuple[str | None, str]:
    """Return (raw value, variable it came from); the prefixed name wins when non-empty."""
    for name in (setting.env, setting.alias):
        if name and env.get(name, "").strip() != "":
            return env[name], name
    return None, setting.env


#: The settings model: one typed, frozen field per row of `SETTINGS`, default from the row.
Settings = create_model(
    "Settings",
    __base__=_SettingsBase,
    **{s.field: (s.kind, s.default) for s in SETTINGS},
)
