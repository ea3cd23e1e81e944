"""Where settings come from: the default database path (per-user data directory, or the
original's data/cpersona.db when present), the settings file, and `cpersona config`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cpersona.cli import main
from cpersona.config import ConfigError, Settings, default_db_path

from conftest import clean_env


@pytest.fixture
def home(tmp_path, monkeypatch):
    """Per-user directories under tmp_path (platformdirs honours the XDG variables)."""
    for key in list(__import__("os").environ):
        if key.startswith(("CPERSONA_", "EMBEDDING_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


def test_default_database_is_per_user_whatever_the_working_directory(home, monkeypatch):
    expected = str(home / "data-home" / "cpersona" / "cpersona.db")
    assert default_db_path() == expected
    other = home / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    assert Settings.from_env({}).db_path == expected  # a host starting the server elsewhere finds the same file


def test_an_existing_original_layout_database_is_kept(home):
    legacy = Path.cwd() / "data" / "cpersona.db"
    legacy.parent.mkdir()
    legacy.write_bytes(b"")
    assert default_db_path() == str(legacy)
    assert Settings.from_env({"CPERSONA_DB_PATH": "/x/y.db"}).db_path == "/x/y.db"  # an explicit path wins


def test_settings_file_values_and_sources(home, monkeypatch):
    path = home / "config-home" / "cpersona" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('recall_mode = "rrf"\nCPERSONA_RRF_K = 30\nfts_enabled = false\n', encoding="utf-8")
    monkeypatch.setenv("CPERSONA_RRF_K", "40")
    settings, sources = Settings.resolve()
    assert (settings.recall_mode, settings.rrf_k, settings.fts_enabled) == ("rrf", 40, False)
    assert sources["recall_mode"] == f"file {path}" and sources["rrf_k"] == "env CPERSONA_RRF_K"
    assert sources["cc_alpha"] == "default"
    assert Settings.from_env({}).recall_mode == "cc"  # an explicit environment mapping reads no file


@pytest.mark.parametrize("text, needle", [
    ("recal_mode = 'rrf'", "'recal_mode' is not a setting"),
    ("rrf_k = 'many'", "rrf_k = 'many' is invalid: expected an integer"),
    ("rrf_k = [1]", "'rrf_k' is not a setting"),
    ("this is not toml", "cannot be read"),
])
def test_a_bad_settings_file_is_named_with_its_problem(home, monkeypatch, text, needle):
    path = home / "mine.toml"
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv("CPERSONA_CONFIG_FILE", str(path))
    with pytest.raises(ConfigError, match=str(path)) as err:
        Settings.resolve()
    assert needle in str(err.value)


def test_a_named_settings_file_must_exist(home, monkeypatch):
    monkeypatch.setenv("CPERSONA_CONFIG_FILE", str(home / "absent.toml"))
    with pytest.raises(ConfigError, match=r"absent\.toml"):
        Settings.resolve()


def test_cpersona_config_shows_values_and_sources(home, monkeypatch, capsys):
    path = home / "s.toml"
    path.write_text("cc_alpha = 0.5\n", encoding="utf-8")
    monkeypatch.setenv("CPERSONA_CONFIG_FILE", str(path))
    monkeypatch.setenv("CPERSONA_AUTH_TOKEN", "s3cret")
    monkeypatch.setenv("EMBEDDING_MODE", "none")
    monkeypatch.setenv("COLUMNS", "200")  # rich: one table row per line
    assert main(["config", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["variable"]: r for r in out["settings"]}
    assert rows["CPERSONA_CC_ALPHA"] == {"variable": "CPERSONA_CC_ALPHA", "value": 0.5, "source": f"file {path}"}
    assert rows["CPERSONA_EMBEDDING_MODE"]["source"] == "env EMBEDDING_MODE"
    assert rows["CPERSONA_AUTH_TOKEN"]["value"] == "***"  # never printed
    assert rows["CPERSONA_RRF_K"]["source"] == "default" and out["settings_file"] == str(path)
    assert out["database"] == default_db_path()
    assert main(["config", "--changed"]) == 0
    table = capsys.readouterr().out
    assert "CPERSONA_CC_ALPHA" in table and "CPERSONA_RRF_K" not in table and "s3cret" not in table


def test_cpersona_config_with_a_bad_value_exits_2_in_one_line(home):
    import subprocess
    import sys

    env = clean_env(CPERSONA_RRF_K="abc", XDG_CONFIG_HOME=str(home / "config-home"))
    proc = subprocess.run([sys.executable, "-m", "cpersona", "config"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "CPERSONA_RRF_K='abc'" in proc.stderr


def test_a_misspelled_variable_is_named_with_the_setting_it_resembles(home, monkeypatch, capsys):
    from cpersona.cli.settings import unknown_variables

    assert unknown_variables({"CPERSONA_RECALL_MODE": "rrf", "CPERSONA_CONFIG_FILE": "x", "HOME": "/"}) == []
    assert unknown_variables({"CPERSONA_RECAL_MODE": "rrf", "CPERSONA_ZZZ": "1"}) == [
        "CPERSONA_RECAL_MODE is not a setting (did you mean CPERSONA_RECALL_MODE?)",
        "CPERSONA_ZZZ is not a setting; it is ignored"]
    monkeypatch.setenv("CPERSONA_RECAL_MODE", "rrf")
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["config", "--changed"]) == 0
    assert "did you mean CPERSONA_RECALL_MODE?" in capsys.readouterr().out
    assert main(["config", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unknown_variables"][0].startswith("CPERSONA_RECAL_MODE")


def test_every_cli_command_warns_of_a_misspelt_variable(home, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("CPERSONA_RECAL_MODE", "rrf")
    monkeypatch.setenv("CPERSONA_DB_PATH", str(tmp_path / "w.db"))
    main(["stats"])
    assert "warning: CPERSONA_RECAL_MODE is not a setting (did you mean CPERSONA_RECALL_MODE?)" in \
        capsys.readouterr().err
