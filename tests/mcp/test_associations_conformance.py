"""Declared associations answer as the original CPersona 2.6.14 does: the conformance check
(benchmarks/associations_conformance.py) drives both servers over MCP stdio with the same
calls and finds no difference but the deliberate ones (docs/differences.md). Runs when
CPERSONA_ORIGINAL_2614 names the original's console script (see
tests/storage/test_original_compat.py for installing it)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def conformance():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import associations_conformance

        yield associations_conformance
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_ours_and_the_originals_answers_differ_only_where_we_chose_to(conformance, tmp_path):
    original = os.environ.get("CPERSONA_ORIGINAL_2614")
    if not original:
        pytest.skip("CPERSONA_ORIGINAL_2614 not set (console script of the original 2.6.14)")
    out = tmp_path / "report.json"
    status = conformance.main(["--original", original, "--out", str(out)])
    report = json.loads(out.read_text(encoding="utf-8"))
    assert status == 0, [d for d in report["differences"] if "deliberate" not in d]
    assert report["unexpected"] == 0
    ours = report["ours"]
    # the check compared real answers, not two sets of errors
    assert [e["name"] for e in ours["traverse Japanese alias"]["entities"]][:1] == ["payments team"]
    assert ours["retract"]["retracted"] == {"relations": 1, "mentions": 1}
    assert ours["declare paused"]["result"] == "skipped"
    assert {d["call"] for d in report["differences"]} <= {"declare malformed", "declare wrong types",
                                                            "retract wrong types"}


def test_every_deliberate_difference_is_in_the_docs(conformance):
    page = (Path(__file__).resolve().parents[2] / "docs" / "differences.md").read_text(encoding="utf-8")
    section = page.split("## Declared associations", 1)[-1]
    assert "## Declared associations" in page
    for (call, field), _why in conformance.DELIBERATE.items():
        keyword = {"dropped.reason": "reason", "tool_error": "wrong JSON type"}[field]
        assert keyword in section, (call, field)
