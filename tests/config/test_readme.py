"""README.md's settings table is the one generated from `cpersona/config.py`
(`python -m cpersona.devtools.settings_table --write` after adding a setting)."""

from __future__ import annotations

from cpersona.config import SETTINGS
from cpersona.devtools import settings_table


def test_readme_settings_table_matches_the_declaration():
    readme = settings_table.README.read_text(encoding="utf-8")
    assert settings_table.current(readme) == settings_table.block(), (
        "README.md's settings table differs from cpersona/config.py: run "
        "`python -m cpersona.devtools.settings_table --write`")


def test_the_table_lists_every_setting_once():
    table = settings_table.table()
    for setting in SETTINGS:
        assert table.count(f"| `{setting.env}`") == 1, setting.env


def test_rewrite_fixes_a_drifted_table(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{settings_table.START}\n| old |\n{settings_table.END}\nrest\n", encoding="utf-8")
    assert settings_table.rewrite(readme) is True
    text = readme.read_text(encoding="utf-8")
    assert settings_table.current(text) == settings_table.block() and text.endswith("rest\n")
    assert settings_table.rewrite(readme) is False
