"""The database a hook finds without pydantic (util/places.py: resolve_db_target) is the one
`Settings` names — from the environment, the settings file or the default."""

from __future__ import annotations

import pytest
from cpersona.config import Settings
from cpersona.util.places import db_target, resolve_db_target


def settings_target(env):
    s = Settings.from_env(env)
    return db_target(s.db_url, s.db_path)


@pytest.mark.parametrize("env, file_text", [
    ({}, None),
    ({"CPERSONA_DB_PATH": "  ~/mem/one.db "}, None),
    ({}, 'db_path = "{tmp}/from-file.db"\n'),
    ({"CPERSONA_DB_PATH": "{tmp}/env-wins.db"}, 'CPERSONA_DB_PATH = "{tmp}/from-file.db"\n'),
    ({"CPERSONA_DB_PATH": "   "}, 'db_path = "{tmp}/blank-env-means-unset.db"\n'),
    ({}, 'db_url = "postgresql://me:secret@db.example/mem"\ndb_path = "{tmp}/ignored.db"\n'),
    ({"CPERSONA_DB_PATH": ":memory:"}, None),
])
def test_the_same_database_as_settings(tmp_path, monkeypatch, env, file_text):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    env = {k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()}
    if file_text is not None:
        config = tmp_path / "config.toml"
        config.write_text(file_text.replace("{tmp}", str(tmp_path)), encoding="utf-8")
        env["CPERSONA_CONFIG_FILE"] = str(config)
    assert resolve_db_target(env) == settings_target(env)


def test_a_url_is_named_without_its_password():
    target = db_target("postgresql://me:secret@db.example:5432/mem", "")
    assert target.key == "postgresql://me:secret@db.example:5432/mem" and target.label == "postgresql://me@db.example:5432/mem"
    assert db_target("", ":memory:").key == ""


def test_an_unreadable_settings_file_is_an_error_naming_it(tmp_path):
    bad = tmp_path / "config.toml"
    bad.write_text("db_path = [", encoding="utf-8")
    with pytest.raises(ValueError, match=r"config\.toml"):
        resolve_db_target({"CPERSONA_CONFIG_FILE": str(bad)})
