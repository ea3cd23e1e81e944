"""Settings.from_env: defaults, aliases, malformed values, bounds, embedding-mode resolution,
and the CLI's one-line exit-2 contract for bad configuration."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cpersona.config import SETTINGS, ConfigError, Settings, default_db_path
from cpersona.embedding import local, provider

from conftest import assert_one_line_error, clean_env


# ------------------------------------------------------------------ defaults
def test_defaults_with_empty_environment():
    s = Settings.from_env({})
    assert s.db_path == default_db_path()  # tests/config/test_sources.py: where that is
    assert s.fts_enabled is True
    assert s.max_content_length == 16000
    assert s.max_profile_length == 2000
    assert s.max_metadata_length == 8000
    assert s.embedding_mode == "auto"
    assert s.embedding_url == ""
    assert s.recall_mode == "cc"
    assert s.rrf_k == 60
    assert s.max_memories == 10000
    assert s.vector_min_similarity == 0.3
    assert s.recall_preview_chars == 500
    assert s.episode_penalty_enabled is True
    assert s.episode_decay_rate == 0.01
    assert s.episode_decay_floor == 0.5
    assert s.autocut_enabled is True
    assert s.autocut_min_gap_ratio == 0.15
    assert s.autocut_min_results == 3
    assert s.degraded_advisory is True
    assert s.embedding_cache_size == 256
    assert s.embedding_cache_ttl == 300.0
    assert s.transport == "stdio"
    assert s.http_host == "127.0.0.1"
    assert s.http_port == 8402
    assert s.allow_unauthenticated_http is False


def test_every_setting_default_is_of_its_declared_type():
    s = Settings.from_env({})
    for row in SETTINGS:
        assert type(getattr(s, row.field)) is row.kind, row.field


def test_empty_and_blank_values_mean_default():
    s = Settings.from_env({"CPERSONA_RRF_K": "", "CPERSONA_FTS_ENABLED": "   ", "CPERSONA_RECALL_MODE": ""})
    assert (s.rrf_k, s.fts_enabled, s.recall_mode) == (60, True, "cc")


def test_values_are_parsed_and_stripped():
    s = Settings.from_env(
        {
            "CPERSONA_RRF_K": " 42 ",
            "CPERSONA_VECTOR_MIN_SIMILARITY": "0.25",
            "CPERSONA_RECALL_MODE": "RSF",
            "CPERSONA_DB_PATH": "/tmp/somewhere/m.db",
            "CPERSONA_MAX_CONTENT_LENGTH": "100",
        }
    )
    assert s.rrf_k == 42
    assert s.vector_min_similarity == 0.25
    assert s.recall_mode == "rsf"
    assert s.db_path == "/tmp/somewhere/m.db"
    assert s.max_content_length == 100


def test_overrides_win_over_environment():
    s = Settings.from_env({"CPERSONA_RRF_K": "7"}, rrf_k=9, embedding_mode="none")
    assert s.rrf_k == 9
    assert s.embedding_mode == "none"


def test_settings_are_frozen():
    s = Settings.from_env({})
    with pytest.raises(Exception):
        s.rrf_k = 5


def test_db_file_resolution(tmp_path):
    assert Settings.from_env({}, db_path=":memory:").db_file is None
    assert Settings.from_env({}, db_path=str(tmp_path / "a.db")).db_file == (tmp_path / "a.db").resolve()


# ------------------------------------------------------------------- booleans
@pytest.mark.parametrize(
    "raw, expected",
    [("true", True), ("1", True), ("yes", True), ("on", True), ("TRUE", True), (" On ", True), ("Yes", True),
     ("false", False), ("0", False), ("no", False), ("off", False), ("FALSE", False), (" Off ", False)],
)
def test_boolean_spellings(raw, expected):
    assert Settings.from_env({"CPERSONA_FTS_ENABLED": raw}).fts_enabled is expected
    assert Settings.from_env({"CPERSONA_DEGRADED_ADVISORY": raw}).degraded_advisory is expected


# -------------------------------------------------------------------- aliases
def test_unprefixed_aliases_are_read():
    s = Settings.from_env({"EMBEDDING_MODE": "none", "EMBEDDING_HTTP_URL": "http://h:1/embed"})
    assert s.embedding_mode == "none"
    assert s.embedding_url == "http://h:1/embed"


def test_prefixed_form_wins_when_non_empty():
    s = Settings.from_env(
        {
            "CPERSONA_EMBEDDING_MODE": "http",
            "EMBEDDING_MODE": "none",
            "CPERSONA_EMBEDDING_URL": "http://prefixed:1/embed",
            "EMBEDDING_HTTP_URL": "http://alias:2/embed",
        }
    )
    assert s.embedding_mode == "http"
    assert s.embedding_url == "http://prefixed:1/embed"


def test_empty_prefixed_form_falls_back_to_alias():
    s = Settings.from_env(
        {
            "CPERSONA_EMBEDDING_MODE": "",
            "EMBEDDING_MODE": "none",
            "CPERSONA_EMBEDDING_URL": "  ",
            "EMBEDDING_HTTP_URL": "http://alias:2/embed",
        }
    )
    assert s.embedding_mode == "none"
    assert s.embedding_url == "http://alias:2/embed"


def test_malformed_alias_error_names_the_alias():
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"EMBEDDING_MODE": "bogus"})
    assert "EMBEDDING_MODE" in str(err.value)
    assert "CPERSONA_EMBEDDING_MODE" not in str(err.value)


# ---------------------------------------------------------- malformed / bounds
@pytest.mark.parametrize(
    "var, raw",
    [
        ("CPERSONA_RRF_K", "abc"),
        ("CPERSONA_RRF_K", "1.5"),
        ("CPERSONA_MAX_MEMORIES", "ten"),
        ("CPERSONA_VECTOR_MIN_SIMILARITY", "high"),
        ("CPERSONA_VECTOR_MIN_SIMILARITY", "nan"),
        ("CPERSONA_EPISODE_DECAY_RATE", "inf"),
        ("CPERSONA_FTS_ENABLED", "maybe"),
        ("CPERSONA_DEGRADED_ADVISORY", "2"),
        ("CPERSONA_RECALL_MODE", "hybrid"),
        ("CPERSONA_EMBEDDING_MODE", "openai"),
        ("CPERSONA_TRANSPORT", "sse"),
        ("CPERSONA_LOG_LEVEL", "verbose"),
    ],
)
def test_malformed_value_raises_config_error_naming_variable(var, raw):
    with pytest.raises(ConfigError) as err:
        Settings.from_env({var: raw})
    message = str(err.value)
    assert var in message
    assert repr(raw) in message
    assert "\n" not in message
    assert "expected" in message


@pytest.mark.parametrize(
    "var, raw",
    [
        ("CPERSONA_RRF_K", "0"),
        ("CPERSONA_RRF_K", "-3"),
        ("CPERSONA_HTTP_PORT", "0"),
        ("CPERSONA_HTTP_PORT", "70000"),
        ("CPERSONA_MAX_MEMORIES", "0"),
        ("CPERSONA_MAX_CONTENT_LENGTH", "0"),
        ("CPERSONA_VECTOR_MIN_SIMILARITY", "1.5"),
        ("CPERSONA_VECTOR_MIN_SIMILARITY", "-1.01"),
        ("CPERSONA_EPISODE_DECAY_FLOOR", "1.2"),
        ("CPERSONA_AUTOCUT_MIN_RESULTS", "1"),
        ("CPERSONA_EMBEDDING_TIMEOUT_SECS", "0"),
    ],
)
def test_out_of_bounds_value_is_rejected(var, raw):
    with pytest.raises(ConfigError) as err:
        Settings.from_env({var: raw})
    assert var in str(err.value)


@pytest.mark.parametrize(
    "var, raw, field, value",
    [
        ("CPERSONA_RRF_K", "1", "rrf_k", 1),
        ("CPERSONA_HTTP_PORT", "65535", "http_port", 65535),
        ("CPERSONA_VECTOR_MIN_SIMILARITY", "-1", "vector_min_similarity", -1.0),
        ("CPERSONA_VECTOR_MIN_SIMILARITY", "1", "vector_min_similarity", 1.0),
        ("CPERSONA_EPISODE_DECAY_FLOOR", "0", "episode_decay_floor", 0.0),
        ("CPERSONA_AUTOCUT_MIN_RESULTS", "2", "autocut_min_results", 2),
    ],
)
def test_bounds_are_inclusive(var, raw, field, value):
    assert getattr(Settings.from_env({var: raw}), field) == value


def test_config_error_message_shape():
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"CPERSONA_RRF_K": "abc"})
    assert str(err.value).startswith("CPERSONA_RRF_K='abc' is invalid: expected an integer")
    assert "1" in str(err.value).split("expected", 1)[1]  # the lower bound is stated


# ------------------------------------------------------ embedding mode "auto"
def test_auto_picks_http_when_url_is_set(monkeypatch):
    monkeypatch.setattr(local, "model_installed", lambda name: True)
    s = Settings.from_env({"CPERSONA_EMBEDDING_URL": "http://127.0.0.1:9/embed"})
    assert s.embedding_mode == "auto"
    assert provider.resolve_mode(s) == "http"


def test_auto_picks_bundled_model_without_url(monkeypatch):
    monkeypatch.setattr(local, "model_installed", lambda name: True)
    assert provider.resolve_mode(Settings.from_env({})) == "local"


def test_auto_falls_back_to_none(monkeypatch):
    monkeypatch.setattr(local, "model_installed", lambda name: False)
    s = Settings.from_env({})
    assert provider.resolve_mode(s) == "none"
    assert provider.build_embedder(s) is None


def test_explicit_mode_is_not_resolved(monkeypatch):
    monkeypatch.setattr(local, "model_installed", lambda name: True)
    assert provider.resolve_mode(Settings.from_env({"CPERSONA_EMBEDDING_MODE": "none"})) == "none"
    assert provider.resolve_mode(Settings.from_env({"EMBEDDING_MODE": "http"})) == "http"


def test_http_mode_without_url_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        provider.build_embedder(Settings.from_env({"CPERSONA_EMBEDDING_MODE": "http"}))
    assert "CPERSONA_EMBEDDING_URL" in str(err.value)


def test_local_mode_without_model_is_a_config_error(monkeypatch):
    monkeypatch.setattr(local, "model_installed", lambda name: False)
    with pytest.raises(ConfigError) as err:
        provider.build_embedder(Settings.from_env({"CPERSONA_EMBEDDING_MODE": "local"}))
    assert "CPERSONA_EMBEDDING_MODE=local" in str(err.value)


def test_http_mode_builds_http_embedder():
    emb = provider.build_embedder(Settings.from_env({"EMBEDDING_MODE": "http", "EMBEDDING_HTTP_URL": "http://127.0.0.1:9/embed"}))
    try:
        assert emb.mode == "http"
        assert emb.url == "http://127.0.0.1:9/embed"
    finally:
        emb.close()


# ------------------------------------------------------------------ the CLI
def _run_cli(tmp_path, **env):
    return subprocess.run(
        [sys.executable, "-m", "cpersona"],
        env=clean_env(CPERSONA_DB_PATH=str(tmp_path / "cli.db"), **env),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "env, needle",
    [
        ({"CPERSONA_RRF_K": "abc"}, "CPERSONA_RRF_K"),
        ({"CPERSONA_EMBEDDING_MODE": "http"}, "CPERSONA_EMBEDDING_URL"),
    ],
    ids=["malformed-int", "http-without-url"],
)
def test_cli_bad_config_exits_2_with_one_line(tmp_path, env, needle):
    proc = _run_cli(tmp_path, **env)
    assert_one_line_error(proc, needle)
    assert not (tmp_path / "cli.db").exists()


def test_secrets_are_kept_verbatim_and_hidden_from_repr():
    s = Settings.from_env({"CPERSONA_AUTH_TOKEN": " tok\n", "EMBEDDING_API_KEY": "sk-secret-1"})
    assert s.auth_token == " tok\n", "a secret is never trimmed (the token rules refuse whitespace instead)"
    assert s.embedding_api_key == "sk-secret-1"
    assert repr(" tok\n") not in repr(s) and "sk-secret-1" not in repr(s)
