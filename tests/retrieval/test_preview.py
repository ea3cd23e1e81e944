"""Preview tier and budgets: pure-prefix
previews with refs, the 200,000-char full_content budget spent on the best rows first,
get_contents round trips within 40,000 chars (deferring the rest, saying so), and ownership:
get_contents never returns another agent's row."""

from __future__ import annotations

import pytest
from cpersona.errors import InvalidArgument
from cpersona.service import answers

from quality_helpers import make, recall


@pytest.fixture
def eng(tmp_path):
    e = make(tmp_path / "pv.db", embedder=None, max_content_length=60_000)
    yield e
    e.close()


def msg(ref, n, ch="x"):
    m = {"content": ch * n}
    if ref:
        m["ref"] = ref
    return m


def test_preview_is_a_pure_prefix_only_for_rows_with_a_ref():
    out = answers.previews({"messages": [msg("mem:1", 800), msg(None, 800), msg("ep:2", 100)]}, 500)
    a, b, c = out["messages"]
    assert a == {"content": "x" * 500, "ref": "mem:1", "content_truncated": True, "content_len": 800}
    assert b == msg(None, 800) and c == msg("ep:2", 100)
    assert answers.previews({"messages": [msg("mem:1", 800)]}, 0)["messages"][0]["content"] == "x" * 800


def test_full_content_budget_spends_from_the_best_row():
    rows = [msg("mem:1", 90_000, "a"), msg("mem:2", 90_000, "b"), msg("mem:3", 90_000, "c"), msg("mem:4", 150_000, "d")]
    out = answers.previews({"messages": rows}, 500, full_content=True)
    best, third, second, first = out["messages"][3], out["messages"][2], out["messages"][1], out["messages"][0]
    assert len(best["content"]) == 150_000 and "content_truncated" not in best  # best row whole
    assert third["content_truncated"] is True and second["content_truncated"] is True and first["content_truncated"]
    assert out["full_content_budget_chars"] == 200_000
    small = answers.previews({"messages": [msg("mem:1", 900), msg("mem:2", 900)]}, 500, full_content=True)
    assert "full_content_budget_chars" not in small and all(len(m["content"]) == 900 for m in small["messages"])
    huge_best = answers.previews({"messages": [msg("mem:1", 10), msg("mem:2", 250_000)]}, 500, full_content=True)
    assert len(huge_best["messages"][1]["content"]) == 250_000  # the best row is always admitted whole


def test_refs_round_trip_through_get_contents(eng):
    long_text = "The deployment runbook for kestrel. " + "step " * 399 + "end"
    mid = eng.store("a", long_text, timestamp="2026-03-01T10:00:00Z", msg_id="m-1", source={"type": "User", "id": "u1"})["id"]
    eid = eng.archive_episode("a", "kestrel deployment session " + "detail " * 200, resolved=True)["episode_id"]
    shaped = answers.previews(recall(eng, "kestrel deployment", limit=10), eng.settings.recall_preview_chars)
    by_ref = {m["ref"]: m for m in shaped["messages"]}
    assert by_ref[f"mem:{mid}"]["content_truncated"] is True and by_ref[f"mem:{mid}"]["content_len"] == len(long_text)
    got = eng.get_contents("a", list(by_ref))
    items = {i["ref"]: i for i in got["items"]}
    assert got["missing"] == [] and got["count"] == 2 and "deferred" not in got
    assert items[f"mem:{mid}"] == {"ref": f"mem:{mid}", "content": long_text, "source": {"type": "User", "id": "u1"},
                                   "timestamp": "2026-03-01T10:00:00Z", "id": "m-1"}
    ep = items[f"ep:{eid}"]
    assert ep["content"].startswith("[Episode] kestrel deployment session") and ep["resolved"] is True
    assert ep["source"] == {"System": "episode"} and ep["timestamp"]
    for m in shaped["messages"]:
        assert items[m["ref"]]["content"].startswith(m["content"])  # the preview is a prefix of the full text


def test_get_contents_never_returns_another_agents_row(eng):
    mine = eng.store("a", "my note")["id"]
    theirs = eng.store("b", "their secret note")["id"]
    their_ep = eng.archive_episode("b", "their episode")["episode_id"]
    own_ep = eng.archive_episode("a", "my episode")["episode_id"]
    got = eng.get_contents("a", [f"mem:{theirs}", f"ep:{their_ep}", f"mem:{mine}", "mem:999", "bogus", "mem:-1", "ep:x",
                                 f"ep:{own_ep}"])
    assert [i["ref"] for i in got["items"]] == [f"mem:{mine}", f"ep:{own_ep}"]
    assert got["missing"] == [f"mem:{theirs}", f"ep:{their_ep}", "mem:999", "bogus", "mem:-1", "ep:x"]


def test_get_contents_budget_defers_and_says_so(eng):
    ids = [eng.store("a", f"{i} " + "y" * 15_000)["id"] for i in range(4)]
    refs = [f"mem:{i}" for i in ids]
    got = eng.get_contents("a", [*refs, "mem:12345"])
    assert got["count"] == 2 and got["budget_chars"] == 40_000
    assert got["deferred"] == [*refs[2:], "mem:12345"] and "get_contents again" in got["note"]
    assert sum(len(i["content"]) for i in got["items"]) <= 40_000
    big = eng.store("a", "z" * 50_000)["id"]
    first = eng.get_contents("a", [f"mem:{big}", refs[0]])
    assert first["count"] == 1 and len(first["items"][0]["content"]) == 50_000 and first["deferred"] == [refs[0]]


def test_get_contents_argument_rules(eng):
    for bad in ([], "mem:1", [1], ["mem:1"] * 21, ["m" * 100]):
        with pytest.raises(InvalidArgument):
            eng.get_contents("a", bad)
    assert eng.get_contents("a", ["mem:1", "mem:1"])["missing"] == ["mem:1"]  # duplicates collapse


def test_refs_naming_one_row_are_expanded_once(eng):
    mid = eng.store("a", "one note about kestrels")["id"]
    got = eng.get_contents("a", [str(mid), f"mem:{mid}", f" {mid}"])
    assert got["count"] == 1 and len(got["items"]) == 1 and got["missing"] == []
