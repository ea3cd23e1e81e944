"""Argument edges found by a break-it pass, over the real MCP path: an integer argument
written as a whole float (`1e2`, which JSON Schema's `integer` admits) is taken as that
integer, a fractional or quoted number is still refused; a query of only invisible
characters is answered as a blank query and says so (it answered nothing, silently)."""

from __future__ import annotations

from cpersona.service.answers import INVISIBLE_NOTE

from conftest import run_mcp


def test_whole_float_integers_are_accepted_and_others_refused(tmp_path):
    async def scenario(client):
        await client.ok("store", {"agent_id": "kai", "content": "The deploy runs every Thursday."})
        whole = await client.ok("recall", {"agent_id": "kai", "query": "deploy Thursday", "limit": 1e2})
        listed = await client.ok("list_memories", {"agent_id": "kai", "limit": 5.0})
        refused = [await client.call("recall", {"agent_id": "kai", "query": "deploy", "limit": bad})
                   for bad in (2.5, "10", True)]
        return whole, listed, refused

    whole, listed, refused = run_mcp(scenario, tmp_path / "n.db").result
    assert [m["content"] for m in whole["messages"]] == ["The deploy runs every Thursday."]
    assert len(listed["memories"]) == 1
    assert all(r.is_error and "limit" in r.text for r in refused)


def test_a_query_of_invisible_characters_answers_as_a_blank_query(tmp_path):
    async def scenario(client):
        for n in range(3):
            await client.ok("store", {"agent_id": "kai", "content": f"fact number {n} about the deploy"})
        blank = await client.ok("recall", {"agent_id": "kai", "query": ""})
        invisible = await client.ok("recall", {"agent_id": "kai", "query": "\u200b\u2060 \ufeff"})
        return blank, invisible

    blank, invisible = run_mcp(scenario, tmp_path / "b.db").result
    assert [m["ref"] for m in invisible["messages"]] == [m["ref"] for m in blank["messages"]] != []
    assert invisible["note"] == INVISIBLE_NOTE and "note" not in blank
