"""Context blocks (service/context_block.py) over the real engine: within the token budget,
rows whole or not at all, best last, nothing when nothing relates."""

from __future__ import annotations

import pytest
from cpersona.service import context_block as cb

pytestmark = pytest.mark.both_backends


def test_tokens_are_utf8_bytes_over_three_rounded_up():
    assert cb.tokens("") == 0 and cb.tokens("abc") == 1 and cb.tokens("abcd") == 2 and cb.tokens("日本") == 2


def test_fit_takes_whole_lines_in_priority_order_and_never_exceeds_the_budget():
    lines = [f"- row {i} " + "x" * 40 for i in range(10)]
    for budget in (0, 10, 40, 80, 200, 10_000):
        block = cb.fit("head", "foot", [("A", lines[:5]), ("B", lines[5:])], budget)
        assert block.tokens <= budget and (block.text == "") == (block.rows == 0)
        shown = [line for line in block.text.splitlines() if line.startswith("- ")]
        assert shown == [line for line in lines if line in shown]  # whole lines, in order
    assert cb.fit("h", "f", [("A", lines)], 10_000, reverse=True).text.splitlines()[2] == lines[-1]


def test_prompt_query_keeps_the_prompt_and_bounds_the_rest():
    assert cb.prompt_query("  when?  ", ["the turn before", "older"]) == "when?\nthe turn before\nolder"
    long = cb.prompt_query("p" * 10, ["t" * 5000], chars=100)
    assert long.startswith("p" * 10 + "\n") and len(long) == 100


def test_prompt_block_is_recall_best_last_within_budget(make_engine):
    eng = make_engine()
    for text in ("Deploys to production run on Thursdays", "The deploy pipeline has two stages",
                 "Lunch is at noon", "Production deploys need Aiko's approval"):
        eng.store("a", text)
    block = cb.prompt_block(eng, "a", "", "when do production deploys run?", 500)
    rows = [line for line in block.text.splitlines() if line.startswith("- [")]
    answer = [m for m in eng.recall(cb.recall_request("a", "when do production deploys run?", 10, None),
                                    verbose=False)["messages"] if m.get("ref")]
    assert [r.split("]")[0][3:].split(" ")[0] for r in rows] == [m["ref"] for m in answer][-len(rows):]
    assert "Thursdays" in rows[-1] and "noon" not in block.text and block.tokens <= 500
    assert cb.prompt_block(eng, "a", "", "quantum zebra", 500) == cb.EMPTY
    assert cb.prompt_block(eng, "a", "", "when do production deploys run?", 0) == cb.EMPTY
    tight = cb.prompt_block(eng, "a", "", "when do production deploys run?", 60)
    assert tight.tokens <= 60 and tight.rows <= 1


def test_session_block_profile_episodes_related_and_newest(make_engine):
    eng = make_engine()
    eng.update_profile("a", "Works on the web shop. " * 40)
    eng.archive_episode("a", "Moved the web shop to the new cluster")
    for i in range(8):
        eng.store("a", f"web shop note {i}", project_id="web")
    eng.store("a", "a global note about the web shop")
    block = cb.session_block(eng, "a", "web", "web shop", 400, skip=lambda row: row["content"].endswith("7"))
    assert block.tokens <= 400 and "Profile:" in block.text and "[ep:1" in block.text
    assert "web shop note 7" not in block.text  # skipped (e.g. this session's own rows)
    assert "web shop note 7" in cb.session_block(eng, "a", "web", "web shop", 400).text
    assert cb.session_block(make_engine("empty.db"), "a", "", "web", 400) == cb.EMPTY
