"""The query's anchors through the real MCP stdio path (retrieval/anchors.py): a near-miss
identifier and an absent name get no row and say why; the exact identifier, a present name
and deep recall answer. Embeddings off (the default of `run_mcp`)."""

from __future__ import annotations

import pytest

from conftest import run_mcp
from quality_helpers import ANCHOR_EXACT as EXACT
from quality_helpers import ANCHOR_NEAR_MISS as NEAR_MISS
from quality_helpers import OPS_NOTES as NOTES

QUESTIONS = {
    "near_miss": {"query": NEAR_MISS},
    "near_miss_deep": {"query": NEAR_MISS, "deep": True},
    "exact": {"query": EXACT},
    "absent_name": {"query": "What did Jolene paint for the office kitchen?"},
    "present_name": {"query": "What did Melanie paint for the office kitchen?"},
}


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    async def scenario(client):
        for text in NOTES:
            await client.ok("store", {"agent_id": "ops", "message": {"content": text}})
        return {name: await client.ok("recall", {"agent_id": "ops", "limit": 5, **args})
                for name, args in QUESTIONS.items()}

    run = run_mcp(scenario, tmp_path_factory.mktemp("anchors") / "a.db")
    assert not run.stream_errors
    return run.result


def best(answer: dict) -> str:
    return answer["messages"][-1]["content"]


def test_near_miss_identifier_over_mcp(answers):
    assert answers["near_miss"]["messages"] == []
    assert answers["near_miss"]["withheld"]["why"] == "none of the matched rows mentions CVE-2024-3095"
    assert best(answers["near_miss_deep"]) == NOTES[0]
    assert best(answers["exact"]) == NOTES[0]


def test_absent_name_over_mcp(answers):
    assert answers["absent_name"]["messages"] == []
    assert answers["absent_name"]["withheld"]["why"] == "none of the matched rows mentions Jolene"
    assert best(answers["present_name"]) == NOTES[-1]
