"""Settings: one declared, typed, bounded and described field per CPERSONA_* variable.

`Settings.from_env()` reads `CPERSONA_<FIELD>` (or the unprefixed alias the original
CPersona documents, e.g. EMBEDDING_MODE; the prefixed name wins when both are set and
non-empty). Empty values mean "default". Booleans accept true/false/1/0/yes/no/on/off.
A malformed or out-of-range value raises `ConfigError` naming the variable and the expected
form — startup stops with that one line rather than guessing a default. A settings file
(TOML, `field = value`, e.g. `recall_mode = "rrf"`) may hold the same settings:
`CPERSONA_CONFIG_FILE`, else `config.toml` in the per-user config directory (platformdirs).
The environment wins over the file, the file over the default; `Settings.resolve()` also
says where each value came from (`cpersona config`).
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from annotated_types import Ge, Le
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.json_schema import JsonDict

from cpersona.errors import ConfigError
from cpersona.util.places import APP_NAME, CONFIG_FILE_ENV, LEGACY_DB_PATH, default_config_file, default_db_path

__all__ = ["APP_NAME", "CONFIG_FILE_ENV", "LEGACY_DB_PATH", "SETTINGS", "ConfigError", "Setting", "Settings",
           "default_config_file", "default_db_path"]


def _alias(name: str) -> JsonDict:
    return {"alias": name}


class Settings(BaseModel):
    """Resolved configuration (frozen). Build with `Settings.from_env()`."""

    model_config = ConfigDict(frozen=True)

    # ------------------------------------------------------------------ storage
    db_path: str = Field("", description="SQLite database file ('' = data/cpersona.db if it exists in the "
                         "working directory, else cpersona.db in the per-user data directory; `~` expanded; "
                         "`:memory:` = RAM only).")
    fts_enabled: bool = Field(True, description="Keep the FTS5 trigram indexes; false = LIKE keyword search only.")
    db_url: str = Field("", description="postgresql://… selects a shared PostgreSQL database (needs "
                        "`cpersona-memory[postgres]`); empty = the SQLite file at db_path.")
    db_pool_size: int = Field(10, ge=2, le=1000, description="PostgreSQL: most connections one node opens.")
    busy_timeout_ms: int = Field(5000, ge=50, le=600_000,
                                 description="Milliseconds a write waits for another process's write lock before "
                                             "the call is answered as busy (error_kind \"busy\", retryable).")
    max_content_length: int = Field(16000, ge=1, le=10_000_000, description="Longest memory / summary, in characters.")
    max_profile_length: int = Field(2000, ge=1, le=1_000_000, description="Longest profile in characters (cut beyond).")
    max_metadata_length: int = Field(8000, ge=2, le=1_000_000, description="Longest source / metadata JSON, in chars.")
    startup_integrity_check: bool = Field(True, description="At start, run SQLite's quick_check in the background "
                                          "and log an error when the file is damaged.")
    # ------------------------------------------------------------- portability
    export_dir: str = Field(
        "", description="Folder export_memories / import_memories may use over MCP ('' = <database folder>/exports).")
    max_import_bytes: int = Field(104_857_600, ge=1, le=2**40,
                                  description="Largest file import_memories reads, in bytes (default 100 MiB).")
    # ---------------------------------------------------------------- embedding
    embedding_mode: Literal["auto", "none", "http", "local", "api"] = Field(
        "auto", description="auto = http if a URL is set, else the bundled model if installed, else none; "
                            "api = an OpenAI-compatible /v1/embeddings endpoint.",
        json_schema_extra=_alias("EMBEDDING_MODE"))
    embedding_url: str = Field("", description="The /embed endpoint of an HTTP embedding server.",
                               json_schema_extra=_alias("EMBEDDING_HTTP_URL"))
    local_model: Literal["use", "e5"] = Field("use", description="Bundled model: use (USE multilingual, 512-d) or e5.")
    embedding_model: str = Field("", description="Model label recorded with HTTP vectors when the server sends none; "
                                                 "the model requested in api mode (default text-embedding-3-small).",
                                 json_schema_extra=_alias("EMBEDDING_MODEL"))
    embedding_api_url: str = Field("https://api.openai.com/v1/embeddings",
                                   description="api mode: the OpenAI-compatible embeddings endpoint.",
                                   json_schema_extra=_alias("EMBEDDING_API_URL"))
    embedding_api_key: str = Field("", repr=False, description="api mode: the bearer key (never logged).",
                                   json_schema_extra={**_alias("EMBEDDING_API_KEY"), "verbatim": True, "secret": True})
    embedding_threads: int = Field(1, ge=1, le=64, description="BLAS/OpenMP threads for the bundled model.")
    embedding_process: bool = Field(True, description="Run the bundled model in a worker process (a query's "
                                    "embedding then runs beside the keyword search); false = in the server process.")
    embedding_timeout_secs: float = Field(30.0, ge=0.1, le=600, description="Seconds one HTTP embedding call may take.")
    embedding_cache_size: int = Field(256, ge=0, le=1_000_000, description="Query vectors cached (LRU; 0 = off).")
    embedding_cache_ttl: float = Field(300.0, ge=0, le=86400 * 365, description="Seconds a cached query vector lives.")
    degraded_advisory: bool = Field(True, description="Tell the agent in recall when search runs without vectors.")
    model_wait_seconds: float = Field(10.0, ge=0.0, le=600.0, description="Seconds a store or recall waits for "
                                      "the bundled model still loading before going on without a vector.")
    embed_wait_secs: float = Field(5.0, ge=0.05, le=600.0, description="Seconds a recall or write waits for its "
                                   "text's vector (then: keywords only / embedded later, and says so).")
    # ----------------------------------------------------------- task queue
    task_queue_enabled: bool = Field(True, description="Run the worker that embeds rows stored without a vector.")
    task_retry_delay: float = Field(30.0, ge=0.05, le=86400, description="Seconds between retries of a failing task.")
    task_max_retries: int = Field(3, ge=1, le=1000, description="Failed attempts before a task is marked failed.")
    # ------------------------------------------------------ operating context
    operating_context: Literal["on", "off"] = Field("on", description="off = ignore the operating-context file.")
    operating_context_path: str = Field(
        "", description="Operating-context TOML ('' = ~/.cpersona/operating-context.toml).")
    # --------------------------------------------------------------- retrieval
    recall_mode: Literal["cc", "rrf", "rsf", "cascade"] = Field(
        "cc", description="Fusion: cc (convex combination), rrf, rsf or the legacy cascade.")
    cc_alpha: float | None = Field(None, ge=0.0, le=1.0, description="Weight of the vector evidence in cc fusion "
                                   "(1 − α on keywords); unset = per agent from how well its vectors separate "
                                   "neighbouring from random rows (retrieval/separation.py; 0.2 under 50 vectors).")
    recency_weight: float = Field(0.2, ge=0.0, le=1.0, description="Recency / age prior of questions asking for the "
                                  "latest / first: the fused score changes by at most ± weight/2 (0 = off).")
    neighbour_weight: float | None = Field(None, ge=0.0, le=1.0, description="cc: share of its best time-neighbour's "
                                           "score a row can take (retrieval/neighbours.py); unset = 1 − 2α, 0 = off.")
    keyword_ceiling: bool = Field(True, description="cc: a vector hit the keyword lists cut off scores their last "
                                  "row's bm25 × its coverage factor instead of 0 (retrieval/unlisted.py).")
    split_alternatives: bool = Field(True, description="cc: a question '…, A or B?' is also asked per alternative.")
    rrf_k: int = Field(60, ge=1, le=100_000, description="The k of reciprocal rank fusion (Cormack et al. 2009).")
    vector_weight: float = Field(1.0, ge=0.0, le=100.0, description="Weight of the vector channel in rrf / rsf.")
    max_memories: int = Field(10000, ge=1, le=10_000_000,
                              description="Vector scan window: newest embedded rows searched per recall (not a cap).")
    vector_min_similarity: float = Field(0.3, ge=-1.0, le=1.0, description="Cosine floor of the vector retriever "
                                         "(uncalibrated; the retriever keeps half of it outside cascade).")
    recall_preview_chars: int = Field(500, ge=0, le=10_000_000,
                                      description="Recall rows with a ref are cut to this prefix (0 = whole rows).")
    recall_verbose: bool = Field(False, description="Recall rows carry every channel's score in match_reason, "
                                 "not only {signal, score}.")
    list_budget_tokens: int = Field(20000, ge=500, le=10_000_000,
                                    description="Largest list_memories / list_episodes answer, in tokens estimated as "
                                    "UTF-8 bytes / 3; the rest is reached with next_cursor.")
    episode_penalty_enabled: bool = Field(True, description="Rank rows older than the latest episode lower.")
    episode_decay_rate: float = Field(0.01, ge=0.0, le=100.0, description="Episode boundary penalty decay per hour.")
    episode_decay_floor: float = Field(0.5, ge=0.0, le=1.0, description="Smallest episode boundary penalty factor.")
    autocut_enabled: bool = Field(True, description="Cut similarity-scale result lists at their largest score gap.")
    autocut_min_gap_ratio: float = Field(0.15, ge=0.0, le=1.0, description="Gap / top score needed to cut.")
    autocut_min_results: int = Field(3, ge=2, le=1000, description="Shortest list autocut considers.")
    # ------------------------------------------------- gate, confidence, calibration
    gate_enabled: bool = Field(True, description="Apply the quality gate (false returns every scored row).")
    confidence_enabled: bool = Field(False, description="Rank and gate on the confidence score (cosine × time decay).")
    cosine_floor: float = Field(0.20, ge=-1.0, le=1.0, description="Confidence: cosine mapped to 0.")
    cosine_ceil: float = Field(0.75, ge=-1.0, le=1.0, description="Confidence: cosine mapped to 1.")
    decay_rate: float = Field(0.005, ge=0.0, le=100.0, description="Confidence: time decay per hour of age.")
    decay_floor: float = Field(0.3, ge=0.0, le=1.0, description="Confidence: smallest time decay.")
    decay_ceil: float = Field(0.5, ge=0.0, le=1.0, description="Confidence: largest floor a recall boost can reach.")
    recall_boost: float = Field(0.02, ge=0.0, le=10.0, description="Confidence: floor boost per ln(1 + recall_count).")
    boost_decay_rate: float = Field(0.002, ge=0.0, le=100, description="Confidence: boost fade per hour since recall.")
    min_time_range_hours: float = Field(24.0, ge=0.0, le=1e7, description="Confidence: smallest corpus time span.")
    reference_hours: float = Field(168.0, ge=0.001, le=1e7,
                                   description="Confidence: span at which decay is not stretched.")
    resolved_decay_factor: float = Field(0.3, ge=0.0, le=1.0, description="Confidence: factor of resolved episodes.")
    recent_recall_penalty: float = Field(0.7, ge=0.0, le=1.0, description="Confidence: factor of a just-recalled row.")
    recent_recall_window_min: float = Field(5.0, ge=0.0, le=1e6,
                                            description="Confidence: minutes a recall counts as recent.")
    fused_gate_enabled: bool = Field(True, description="Calibrate and apply a gate on the fused score per agent.")
    recall_precision: Literal["strict", "balanced", "lenient"] = Field(
        "balanced", description="Default gate operating point (β 2.0 / 1.0 / 0.5).")
    fused_gate_beta: float = Field(0.0, ge=0.0, le=100.0,
                                   description="Custom default β (> 0 overrides recall_precision).")
    fused_gate_sample_queries: int = Field(40, ge=1, le=1000,
                                           description="Memories used as queries per calibration draw.")
    fused_gate_calibration_draws: int = Field(5, ge=1, le=50, description="Calibration draws (median kept).")
    fused_gate_min_keep: float = Field(0.9, ge=0.0, le=1.0, description="Share of positives a calibrated gate keeps.")
    auto_calibrate: bool = Field(False, description="Recalibrate every agent at every start.")
    calibrate_on_model_change: bool = Field(True, description="Calibrate by itself: at start when stale or lost, "
                                            "and each agent again whenever its embedded rows double.")
    calibrate_min_rows: int = Field(200, ge=10, le=1_000_000, description="Fewest embedded rows an agent (all agents, "
                                    "for the global threshold) needs before the server calibrates it by itself.")
    calibrate_method: Literal["separation", "percentile", "zscore"] = Field(
        "separation", description="Default calibrate_threshold method.")
    calibrate_sample_size: int = Field(200, ge=1, le=100_000, description="Vectors sampled per calibration (default).")
    calibrate_max_sample: int = Field(2000, ge=1, le=20_000, description="Largest sample_size a caller may ask for.")
    calibrate_z_factor: float = Field(1.0, ge=-10.0, le=10.0, description="zscore method: mean + z·std.")
    calibrate_percentile: float = Field(0.95, ge=0.0001, le=1.0, description="percentile method: quantile of the null.")
    calibrate_floor: float = Field(0.05, ge=-1.0, le=1.0, description="Lowest calibrated threshold.")
    calibrate_temporal_window_min: float = Field(30.0, ge=0.01, le=1e6,
                                                 description="Minutes within which two memories count as one session.")
    # ---------------------------------------------------------------- transport
    transport: Literal["stdio", "streamable-http"] = Field("stdio", description="MCP transport.")
    http_host: str = Field("127.0.0.1", description="Address the HTTP transport binds.")
    http_port: int = Field(8402, ge=1, le=65535, description="Port of the HTTP transport.")
    auth_token: str = Field("", repr=False, description="Bearer token every HTTP request must carry (used verbatim; "
                                                     "the proxy sends it to the remote server).",
                            json_schema_extra={"verbatim": True, "secret": True})
    allow_unauthenticated_http: bool = Field(False, description="Serve HTTP without a token (explicit opt-in).")
    acl_file: str = Field("", description="JSON file of per-client tokens and grants (enables ACL mode).")
    cors_origins: str = Field("https://claude.ai,https://www.claude.ai",
                              description="Comma-separated browser origins allowed by CORS ('none' = no CORS).")
    http_allowed_hosts: str = Field("", description="Comma-separated Host names (name or name:port) the HTTP "
                                                    "transport answers; loopback names and the bind address always.")
    http_max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024,
                                     description="Largest HTTP request body, in bytes (413 beyond).")
    remote_url: str = Field("http://localhost:8402/mcp", description="cpersona proxy: the remote MCP endpoint.")
    proxy_max_inflight: int = Field(8, ge=1, le=1000,
                                    description="cpersona proxy: requests awaiting an answer before stdin waits.")
    proxy_connect_timeout_secs: float = Field(5.0, ge=0.1, le=600,
                                              description="cpersona proxy: seconds to open a connection.")
    proxy_read_timeout_secs: float = Field(300.0, ge=1, le=86400,
                                           description="cpersona proxy: seconds to wait for a reply's next bytes.")
    # ----------------------------------------------- host hooks, the local endpoint
    local_endpoint: bool = Field(True, description="A running server also answers this user's hooks and CLI on a "
                                 "private unix socket named after its database (not on Windows).")
    hooks_agent_id: str = Field("claude-code", description="The agent_id the host hooks recall and store as.")
    hooks_project: Literal["context", "folder", "none"] = Field(
        "context", description="A hook's project from its working directory: context = the operating context's "
                               "[paths] and [defaults]; folder = else the repository folder's name; none = global.")
    hooks_session_tokens: int = Field(1500, ge=0, le=100_000, description="Most tokens of the SessionStart block "
                                      "(estimated as UTF-8 bytes / 3; 0 = none).")
    hooks_prompt_tokens: int = Field(800, ge=0, le=100_000,
                                     description="Most tokens of the block added to each prompt (0 = none).")
    hooks_prompt_turns: int = Field(0, ge=0, le=20, description="Transcript turns before a prompt added to its query.")
    hooks_tool_output_chars: int = Field(8000, ge=0, le=10_000_000,
                                         description="Characters of tool output kept in one stored turn.")
    hooks_capture: bool = Field(True, description="PreCompact, Stop and SessionEnd store the session's new turns.")
    hooks_archive_episodes: bool = Field(True, description="SessionEnd also archives an episode: the session's "
                                         "first prompt and counts.")
    # ------------------------------------------------------------- update check
    update_check: bool = Field(True, description="Check the package index for a newer release once per start.")
    update_check_interval_seconds: int = Field(86400, ge=60, le=86400 * 365,
                                               description="Seconds a cached update verdict is reused.")
    update_index_url: str = Field("https://pypi.org/pypi",
                                  description="Package index JSON API base (<url>/<project>/json).")
    log_level: Literal["debug", "info", "warning", "error"] = Field("warning", description="Log level on stderr.")

    @model_validator(mode="before")
    @classmethod
    def _default_db_path(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("db_path"):
            return {**data, "db_path": default_db_path()}
        return data

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read every setting from `environ` (default `os.environ`, which also reads the
        settings file); `overrides` (field=value, used by tests and the CLI) win over both.

        Raises:
            ConfigError: e.g. "CPERSONA_RRF_K='abc' is invalid: expected an integer in [1, 100000]".
        """
        return cls.resolve(environ, **overrides)[0]

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> tuple[Settings, dict[str, str]]:
        """(settings, where each field's value came from: "default", "env <NAME>", "file
        <path>" or "override"). The settings file is read when `environ` is the process
        environment (None) or names one with CPERSONA_CONFIG_FILE.

        Raises:
            ConfigError: a malformed value (naming the variable or the file and key), an
                unreadable or invalid settings file, or an unknown key in it.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        sources = {s.field: "default" for s in SETTINGS}
        if environ is None or env.get(CONFIG_FILE_ENV, "").strip():
            path, found = read_settings_file(env.get(CONFIG_FILE_ENV, "").strip())
            values.update(found)
            sources.update({name: f"file {path}" for name in found})
        for setting in SETTINGS:
            raw, name = setting.lookup(env)
            if raw is None:
                continue
            try:
                values[setting.field] = setting.parse(raw)
            except ValueError as err:
                shown = "<hidden>" if setting.secret else repr(raw)
                raise ConfigError(f"{name}={shown} is invalid: expected {err}") from None
            sources[setting.field] = f"env {name}"
        values.update(overrides)
        sources.update({name: "override" for name in overrides})
        return cls(**values), sources

    @property
    def db_file(self) -> Path | None:
        """Absolute DB path, or None for an in-memory database (":memory:")."""
        if self.db_path == ":memory:":
            return None
        return Path(self.db_path).expanduser().resolve()


# --------------------------------------------------------------- env parsing
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_FORMS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


@dataclass(frozen=True)
class Setting:
    """One variable, derived from a `Settings` field: its type, default, bounds, alias."""

    field: str
    kind: type
    default: Any
    description: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    alias: str | None = None
    verbatim: bool = False
    secret: bool = False

    @property
    def env(self) -> str:
        return "CPERSONA_" + self.field.upper()

    def describe(self) -> str:
        """The accepted form, e.g. "an integer in [1, 100000]" or "one of cc, rrf"."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        form = _FORMS[self.kind]
        if self.minimum is not None and self.maximum is not None:
            return f"{form} in [{self._num(self.minimum)}, {self._num(self.maximum)}]"
        if self.minimum is not None:
            return f"{form} >= {self._num(self.minimum)}"
        return form

    def _num(self, value: float) -> str:
        return str(int(value)) if self.kind is int else f"{value:g}"

    def lookup(self, env: Mapping[str, str]) -> tuple[str | None, str]:
        """(raw value, variable it came from); the prefixed name wins when non-empty."""
        for name in (self.env, self.alias or ""):
            value = env.get(name, "") if name else ""
            if (value if self.verbatim else value.strip()) != "":
                return value, name
        return None, self.env

    def parse(self, raw: str) -> Any:
        """Convert `raw`; raises ValueError(describe()) when it breaks the rule. A verbatim
        setting (a secret) keeps its value exactly, whitespace included: whoever checks it
        refuses stray whitespace rather than trimming it silently."""
        if self.verbatim:
            return raw
        try:
            value = _convert(self.kind, raw)
        except ValueError:
            raise ValueError(self.describe()) from None
        if self.choices:
            if value.lower() not in self.choices:
                raise ValueError(self.describe())
            return value.lower()
        if (self.minimum is not None and value < self.minimum) or (self.maximum is not None and value > self.maximum):
            raise ValueError(self.describe())
        return value


def _convert(kind: type, raw: str) -> Any:
    text = raw.strip()
    if kind is bool:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise ValueError(text)
    if kind is float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(text)
        return value
    return int(text) if kind is int else text


def read_settings_file(explicit: str = "") -> tuple[Path, dict[str, Any]]:
    """(path, {field: value}) of the settings file: `explicit` (CPERSONA_CONFIG_FILE; it
    must exist), else the per-user default (absent = no values). Keys are field names
    (`recall_mode`) or variable names (`CPERSONA_RECALL_MODE`); values are checked like the
    environment's. Raises ConfigError naming the file (and the key) on any problem."""
    path = Path(explicit).expanduser() if explicit else default_config_file()
    if not explicit and not path.is_file():
        return path, {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"settings file {path} ({CONFIG_FILE_ENV}) cannot be read: {err}") from None
    by_name = {s.field: s for s in SETTINGS}
    values: dict[str, Any] = {}
    for key, value in data.items():
        setting = by_name.get(key.lower().removeprefix("cpersona_"))
        if setting is None or isinstance(value, dict | list):
            raise ConfigError(f"settings file {path}: {key!r} is not a setting (see `cpersona config`)")
        raw = ("true" if value else "false") if isinstance(value, bool) else str(value)
        try:
            values[setting.field] = setting.parse(raw)
        except ValueError as err:
            raise ConfigError(f"settings file {path}: {key} = {value!r} is invalid: expected {err}") from None
    return path, values


def _setting(name: str, info: Any) -> Setting:
    annotation = info.annotation
    choices = get_args(annotation) if get_origin(annotation) is Literal else None
    kind = str if choices else next((a for a in get_args(annotation) if a is not type(None)), annotation)
    bounds = {type(m): m for m in info.metadata}
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    ge, le = bounds.get(Ge), bounds.get(Le)
    return Setting(name, kind, info.default, info.description or "",
                   minimum=ge.ge if ge is not None else None, maximum=le.le if le is not None else None,
                   choices=tuple(choices) if choices else None, alias=extra.get("alias"),
                   verbatim=bool(extra.get("verbatim")), secret=bool(extra.get("secret")))


#: Every setting in declaration order (the table docs and `from_env` are built from).
SETTINGS: tuple[Setting, ...] = tuple(_setting(name, info) for name, info in Settings.model_fields.items())
