"""docs/configuration.md's settings table is the one generated from `cpersona/config.py`
(`python -m cpersona.devtools.settings_table --write` after adding a setting)."""

from __future__ import annotations

from cpersona.config import SETTINGS
from cpersona.devtools import settings_table


def test_the_configuration_page_holds_the_generated_settings_table():
    page = settings_table.PAGE.read_text(encoding="utf-8")
    assert settings_table.current(page) == settings_table.block(), (
        "docs/configuration.md's settings table differs from cpersona/config.py: run "
        "`python -m cpersona.devtools.settings_table --write`")


def test_the_table_lists_every_setting_once():
    table = settings_table.table()
    for setting in SETTINGS:
        assert table.count(f"| `{setting.env}`") == 1, setting.env


def test_rewrite_fixes_a_drifted_table(tmp_path):
    page = tmp_path / "configuration.md"
    page.write_text(f"intro\n{settings_table.START}\n| old |\n{settings_table.END}\nrest\n", encoding="utf-8")
    assert settings_table.rewrite(page) is True
    text = page.read_text(encoding="utf-8")
    assert settings_table.current(text) == settings_table.block() and text.endswith("rest\n")
    assert settings_table.rewrite(page) is False
