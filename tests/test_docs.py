"""The documentation says what the code does: every MCP tool and every `cpersona` command has
its place in docs/, every relative link of the README, CONTRIBUTING.md, docs/ and benchmarks/
leads to a file that exists (and, with `#anchor`, to a heading of that file), every benchmark
script and result file is in benchmarks/README.md, and every result file the code cites exists."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import anyio
import pytest
from cpersona.cli.commands import build_parser
from cpersona.mcp.server import build_server

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BENCH = ROOT / "benchmarks"
PAGES = (ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md")), BENCH / "README.md",
         *sorted((BENCH / "rounds").glob("*.md")))
#: A result file named in code or docs (`measured: benchmarks/rounds/2026-11-30-round-05-ranking.md`).
CITED_ROUND = re.compile(r"benchmarks/rounds/([\w.-]+\.md)")
FENCED = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def _prose(text: str) -> str:
    """`text` without fenced code blocks (what a renderer shows as code is no link or heading)."""
    return FENCED.sub("", text)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation (backticks, colons,
    apostrophes, …) dropped, spaces turned into hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of `page`; a repeated heading gets -1, -2, … as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(_prose(page.read_text(encoding="utf-8"))):
        slug = _slug(heading)
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def relative_links(page: Path) -> list[str]:
    """The link targets of `page` that point inside the repository (not http:, mailto:, …)."""
    prose = CODE_SPAN.sub("", _prose(page.read_text(encoding="utf-8")))
    return [t for t in LINK.findall(prose) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def broken_link(page: Path, target: str) -> str | None:
    """Why `target`, a link of `page`, leads nowhere; None when it resolves."""
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
        return f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}"
    if anchor and (file.suffix != ".md" or anchor not in anchors(file)):
        return f"{target}: no heading #{anchor} in {file.name}"
    return None


def command_names() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_every_tool_of_the_tools_list_is_described_in_docs_tools(engine_none):
    page = (DOCS / "tools.md").read_text(encoding="utf-8")
    names = [tool.name for tool in anyio.run(build_server(engine_none).list_tools)]
    assert len(names) > 20
    missing = [n for n in names if not re.search(rf"`{re.escape(n)}[`(]", page)]
    assert not missing, f"describe these tools in docs/tools.md: {missing}"


def test_every_cli_command_is_listed_in_docs_cli():
    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    names = command_names()
    assert {"serve", "recall", "embed-server", "migrate"} <= set(names)
    missing = [n for n in names if not re.search(rf"^cpersona {re.escape(n)}(\s|$)", page, re.M)]
    assert not missing, f"list these commands in docs/cli.md (a line `cpersona <command> …`): {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    problems = [why for target in relative_links(page) if (why := broken_link(page, target))]
    assert not problems, f"{page.relative_to(ROOT)}: {problems}"


def test_the_link_check_catches_a_missing_file_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## The `quality` gate: two steps\n", encoding="utf-8")
    page.write_text("# Page\n[a](other.md#the-quality-gate-two-steps) [b](gone.md) [c](other.md#nope) "
                    "[d](#page) [e](https://example.org/x) `[f](code.md)`\n```\n[g](fenced.md)\n```\n",
                    encoding="utf-8")
    found = {t: broken_link(page, t) for t in relative_links(page)}
    assert list(found) == ["other.md#the-quality-gate-two-steps", "gone.md", "other.md#nope", "#page"]
    assert [t for t, why in found.items() if why] == ["gone.md", "other.md#nope"]


def test_repeated_headings_get_numbered_anchors(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n## Notes\n## Notes\n## Différences: l'original\n", encoding="utf-8")
    assert anchors(page) == {"title", "notes", "notes-1", "différences-loriginal"}


def test_benchmarks_readme_says_how_to_run_every_script_and_lists_every_result_file():
    page = (BENCH / "README.md").read_text(encoding="utf-8")
    scripts = [p.name for p in sorted(BENCH.glob("*.py"))]
    assert "retrieval.py" in scripts
    assert [s for s in scripts if f"`{s}`" not in page] == []
    linked = set(relative_links(BENCH / "README.md"))
    rounds = [f"rounds/{p.name}" for p in sorted((BENCH / "rounds").glob("*.md"))]
    assert len(rounds) > 20
    assert [r for r in rounds if r not in linked] == []


def test_every_result_file_the_code_and_docs_cite_exists():
    texts = {p: p.read_text(encoding="utf-8") for p in (*sorted((ROOT / "cpersona").rglob("*.py")), *PAGES,
                                                        ROOT / "CHANGELOG.md")}
    cited = {(p.relative_to(ROOT), name) for p, text in texts.items() for name in CITED_ROUND.findall(text)}
    assert len(cited) > 20
    assert [c for c in cited if not (BENCH / "rounds" / c[1]).exists()] == []
    # results are cited by their dated file, not by the how-to-run page
    assert [p.relative_to(ROOT) for p, text in texts.items()
            if p.suffix == ".py" and "benchmarks/README.md" in text] == []
