"""docs/modules.md is the module index generated from the code: every module of `cpersona/` has
a docstring whose first sentence says what it is, and the page lists that sentence
(`python -m cpersona.devtools.module_index --write` after adding a module)."""

from __future__ import annotations

from pathlib import Path

from cpersona.devtools import module_index
from cpersona.devtools.module_index import Module, first_sentence


def test_every_module_has_a_docstring():
    found = module_index.modules()
    assert len(found) > 200
    assert module_index.undocumented(found) == []


def test_docs_modules_is_the_generated_index():
    page = module_index.PAGE.read_text(encoding="utf-8")
    assert page == module_index.page(), (
        "docs/modules.md differs from the modules' docstrings: run "
        "`python -m cpersona.devtools.module_index --write`")


def test_the_index_lists_every_module_once_under_its_package():
    page = module_index.page()
    for module in module_index.modules():
        heading = f"## `cpersona/{module.path.parent.as_posix()}/`" if module.path.parent.parts else "## `cpersona/`"
        section = page.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
        line = first_sentence(module.docstring) if module.name == "__init__.py" else f"| `{module.name}` |"
        assert section.count(line) == 1, module.path


def test_the_first_sentence_ends_at_a_full_stop_before_a_capital_not_at_an_abbreviation():
    assert first_sentence("One thing.\nTwo things.") == "One thing."
    assert first_sentence("Costs (e.g. Foo, i.e. Bar) vs. Baz apply. Then more.") == (
        "Costs (e.g. Foo, i.e. Bar) vs. Baz apply.")
    assert first_sentence("Reads `plan.py` and fetch.py first. Then.") == "Reads `plan.py` and fetch.py first."
    assert first_sentence("Shared steps. `Engine` builds them.") == "Shared steps."
    assert first_sentence("The steps of a write:\n\n    embed → write") == "The steps of a write."
    assert first_sentence("A paragraph\nwithout a stop\n\nSecond paragraph.") == "A paragraph without a stop"
    assert first_sentence("") == ""


def test_a_module_without_a_docstring_is_named(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text('"""A package."""\n', encoding="utf-8")
    (tmp_path / "pkg" / "bare.py").write_text("X = 1\n", encoding="utf-8")
    found = module_index.modules(tmp_path)
    assert found == [Module(Path("pkg/__init__.py"), "A package."), Module(Path("pkg/bare.py"), "")]
    assert module_index.undocumented(found) == ["pkg/bare.py"]
    assert "| `bare.py` |  |" in module_index.page(found)


def test_rewrite_fixes_a_drifted_page(tmp_path):
    page = tmp_path / "modules.md"
    page.write_text("# stale\n", encoding="utf-8")
    assert module_index.rewrite(page) is True
    assert page.read_text(encoding="utf-8") == module_index.page()
    assert module_index.rewrite(page) is False
