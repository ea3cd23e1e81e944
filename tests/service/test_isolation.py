"""The isolation axes: read scope of recall / list_memories /
list_episodes on memories and episodes, through the keyword path (embeddings off) and the
vector path (http), and the γ-visible dedup scope of store."""

from __future__ import annotations

import itertools

import pytest
from cpersona.devtools.isolation import visible
from cpersona.service.requests import RecallRequest
from cpersona.storage.scope import Scope

from conftest import db_rows, new_engine

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends

AGENTS = ("A", "B", "")
PROJECTS = ("", "P", "Q")
CHANNELS = ("", "c1", "c2")
TOKEN = "zebra-token-7"  # identifier (digit + inner punctuation): an exact match, never gated
COMBOS = list(itertools.product(AGENTS, PROJECTS, CHANNELS))


def label(agent: str, project: str, channel: str) -> str:
    return f"{agent or '~'}/{project or '~'}/{channel or '~'}"


def mem_text(combo) -> str:
    return f"{TOKEN} memory {label(*combo)}"


def ep_text(combo) -> str:
    return f"{TOKEN} episode {label(*combo)}"


def _populate(engine):
    for combo in COMBOS:
        a, p, c = combo
        assert engine.store(a, mem_text(combo), project_id=p, channel=c)["result"] == "stored"
        assert engine.archive_episode(a, ep_text(combo), project_id=p, channel=c)["ok"] is True


@pytest.fixture(scope="module")
def iso_none(tmp_path_factory):
    eng = new_engine(tmp_path_factory.mktemp("iso") / "none.db")
    _populate(eng)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def iso_http(tmp_path_factory, fake_embed):
    fake_embed.fail = False
    eng = new_engine(tmp_path_factory.mktemp("iso") / "http.db", embedding_mode="http", embedding_url=fake_embed.url)
    _populate(eng)
    yield eng
    eng.close()


READ_CASES = [
    (agent, project, channel)
    for agent in ("A", "")
    for project in (None, "", "P")
    for channel in ("", "c1")
]


def _ids(case):
    agent, project, channel = case
    return f"agent={agent!r}-project={project!r}-channel={channel!r}"


def _recall_labels(engine, agent, project, channel):
    res = engine.recall(RecallRequest(agent, TOKEN, limit=100, channel=channel, project_id=project))
    mems, eps = set(), set()
    for m in res["messages"]:
        text = m["content"]
        if text.startswith("[Episode] "):
            eps.add(text[len("[Episode] "):])
        else:
            mems.add(text)
    return res, mems, eps


def _expected(agent, project, channel, agent_all=False):
    combos = [c for c in COMBOS if visible(c, agent, project, channel, agent_all)]
    return {mem_text(c) for c in combos}, {ep_text(c) for c in combos}


@pytest.mark.parametrize("case", READ_CASES, ids=_ids)
def test_recall_scope_keyword_path(iso_none, case):
    agent, project, channel = case
    _res, mems, eps = _recall_labels(iso_none, agent, project, channel)
    exp_mems, exp_eps = _expected(agent, project, channel)
    assert mems == exp_mems
    assert eps == exp_eps
    assert exp_mems  # every case sees something: the test would notice an always-empty result


@pytest.mark.parametrize("case", READ_CASES, ids=_ids)
def test_recall_scope_vector_path(iso_http, case):
    agent, project, channel = case
    res, mems, eps = _recall_labels(iso_http, agent, project, channel)
    exp_mems, exp_eps = _expected(agent, project, channel)
    assert mems == exp_mems
    assert eps == exp_eps
    # every returned row was also found by the vector retriever (so the vector path's scope is what we checked)
    assert all("vector" in m["match_reason"]["retrievers"] for m in res["messages"])
    assert all(m["match_reason"]["cosine"] > 0.15 for m in res["messages"])


def test_vector_only_path_respects_scope(iso_http):
    """A query the trigram index cannot match (underscores instead of dashes): the vector
    channel (and the word index, which splits at the underscores) answer inside the scope."""
    res = iso_http.recall(RecallRequest("B", "zebra_token_7", limit=100, channel="c2", project_id="Q", deep=True))
    got = {m["content"] for m in res["messages"] if not m["content"].startswith("[Episode]")}
    assert got  # the vector channel did find rows
    allowed = {mem_text(c) for c in COMBOS if visible(c, "B", "Q", "c2")}
    assert got <= allowed
    assert any("vector" in m["match_reason"]["retrievers"] for m in res["messages"])


def test_recall_agent_b_never_sees_a(iso_none):
    _res, mems, eps = _recall_labels(iso_none, "B", None, "")
    assert mems == {mem_text(c) for c in COMBOS if c[0] == "B"}
    assert all(" memory B/" in m for m in mems) and all(" episode B/" in e for e in eps)


def test_recall_unknown_agent_sees_nothing(iso_none):
    res = iso_none.recall(RecallRequest("nobody", TOKEN, limit=100))
    assert res["messages"] == []


def test_recall_unknown_project_sees_global_pool_only(iso_none):
    _res, mems, _eps = _recall_labels(iso_none, "A", "ZZZ", "")
    assert mems == {mem_text(c) for c in COMBOS if c[0] == "A" and c[1] == ""}


def test_recall_unknown_channel_sees_channel_less_rows_only(iso_none):
    _res, mems, _eps = _recall_labels(iso_none, "A", None, "zz")
    assert mems == {mem_text(c) for c in COMBOS if c[0] == "A" and c[2] == ""}


LIST_CASES = [(agent, project) for agent in (None, "", "A") for project in (None, "", "P")]


@pytest.mark.parametrize("case", LIST_CASES, ids=lambda c: f"agent={c[0]!r}-project={c[1]!r}")
def test_list_memories_scope(iso_none, case):
    agent, project = case
    res = iso_none.list_memories(agent, 500, project)
    agent_all = agent in (None, "")
    expected = {mem_text(c) for c in COMBOS if visible(c, agent or "", project, "", agent_all)}
    assert {m["content"] for m in res["memories"]} == expected
    assert res["count"] == len(expected)
    for m in res["memories"]:
        assert label(m["agent_id"], m["project_id"], m["channel"]) in m["content"]


@pytest.mark.parametrize("case", LIST_CASES, ids=lambda c: f"agent={c[0]!r}-project={c[1]!r}")
def test_list_episodes_scope(iso_none, case):
    agent, project = case
    res = iso_none.list_episodes(agent, 200, project)
    agent_all = agent in (None, "")
    expected = {ep_text(c) for c in COMBOS if visible(c, agent or "", project, "", agent_all)}
    assert {e["summary"] for e in res["episodes"]} == expected
    assert res["count"] == len(expected)


def test_list_memories_newest_first_and_fields(iso_none):
    res = iso_none.list_memories("A", 3, None)
    assert res["count"] == 3
    ids = [m["id"] for m in res["memories"]]
    assert ids == sorted(ids, reverse=True)
    assert set(res["memories"][0]) == {
        "id", "agent_id", "project_id", "content", "source", "timestamp", "created_at", "locked", "channel"
    }
    assert res["memories"][0]["locked"] is False


def test_scope_predicate_table():
    """The single predicate helper (the isolation table)."""
    assert Scope().predicate() == ("1 = 1", [])
    assert Scope(agent_id="").predicate() == ("agent_id = ?", [""])
    assert Scope(project_id="").predicate() == ("project_id IN (?, '')", [""])
    assert Scope(project_id="X").predicate("m") == ("m.project_id IN (?, '')", ["X"])
    assert Scope(channel="").predicate() == ("1 = 1", [])
    assert Scope("a", "p", "c").predicate() == ("agent_id = ? AND project_id IN (?, '') AND channel IN (?, '')", ["a", "p", "c"])
    s = Scope("a", "p", "c")
    assert s.admits("a", "", "") and s.admits("a", "p", "c")
    assert not s.admits("b", "p", "c") and not s.admits("a", "q", "c") and not s.admits("a", "p", "d")


# --------------------------------------------------------------------- dedup
def _content_of(engine, row_id):
    return db_rows(engine.db.path, "SELECT content FROM memories WHERE id = ?", (row_id,))[0][0]


def test_msg_id_dedup_spans_channels(engine_none):
    first = engine_none.store("a", "original text", msg_id="m1", channel="c1")
    again = engine_none.store("a", "different text", msg_id="m1", channel="c2")
    assert first["result"] == "stored"
    assert again == {"ok": True, "result": "skipped", "reason": "duplicate msg_id", "id": first["id"]}
    assert _content_of(engine_none, first["id"]) == "original text"  # skip, never upsert
    assert engine_none.list_memories("a")["count"] == 1


def test_changed_content_under_same_msg_id_is_skipped_not_updated(engine_none):
    first = engine_none.store("a", "the deploy is on tuesday", msg_id="m2")
    again = engine_none.store("a", "the deploy is on WEDNESDAY", msg_id="m2")
    assert again["result"] == "skipped" and again["id"] == first["id"]
    assert _content_of(engine_none, first["id"]) == "the deploy is on tuesday"
    assert db_rows(engine_none.db.path, "SELECT COUNT(*) FROM memories") == [(1,)]


def test_msg_id_dedup_is_per_agent(engine_none):
    a = engine_none.store("a", "same text", msg_id="m1")
    b = engine_none.store("b", "same text", msg_id="m1")
    assert a["result"] == b["result"] == "stored"
    assert a["id"] != b["id"]


def test_content_dedup_within_same_channel_and_channel_less(engine_none):
    g = engine_none.store("a", "global channel row")
    dup_from_channel = engine_none.store("a", "global channel row", channel="c1")
    assert dup_from_channel == {"ok": True, "result": "skipped", "reason": "duplicate content", "id": g["id"]}

    c1 = engine_none.store("a", "channel one row", channel="c1")
    same_c1 = engine_none.store("a", "channel one row", channel="c1")
    assert same_c1["result"] == "skipped" and same_c1["id"] == c1["id"]


def test_content_dedup_does_not_cross_sibling_channels(engine_none):
    c1 = engine_none.store("a", "sibling text", channel="c1")
    c2 = engine_none.store("a", "sibling text", channel="c2")
    global_write = engine_none.store("a", "sibling text", channel="")
    assert c1["result"] == c2["result"] == global_write["result"] == "stored"
    assert len({c1["id"], c2["id"], global_write["id"]}) == 3


def test_bucket_write_collides_with_global_row(engine_none):
    g = engine_none.store("a", "shared fact", project_id="")
    bucket = engine_none.store("a", "shared fact", project_id="X")
    assert bucket == {"ok": True, "result": "skipped", "reason": "duplicate content", "id": g["id"]}
    gm = engine_none.store("a", "msg in global", msg_id="gm", project_id="")
    bm = engine_none.store("a", "msg in bucket", msg_id="gm", project_id="X")
    assert bm["result"] == "skipped" and bm["reason"] == "duplicate msg_id" and bm["id"] == gm["id"]


def test_global_write_does_not_collide_with_bucket_copy(engine_none):
    bucket = engine_none.store("a", "bucket fact", project_id="X")
    g = engine_none.store("a", "bucket fact", project_id="")
    assert bucket["result"] == g["result"] == "stored"
    bm = engine_none.store("a", "bucket msg", msg_id="bm", project_id="X")
    gm = engine_none.store("a", "global msg", msg_id="bm", project_id="")
    assert bm["result"] == gm["result"] == "stored"
    rows = db_rows(engine_none.db.path, "SELECT project_id FROM memories WHERE content IN ('bucket fact') ORDER BY id")
    assert rows == [("X",), ("",)]


def test_same_msg_id_allowed_in_sibling_buckets(engine_none):
    x = engine_none.store("a", "x text", msg_id="m", project_id="X")
    y = engine_none.store("a", "y text", msg_id="m", project_id="Y")
    assert x["result"] == y["result"] == "stored"


def test_dedup_compares_sanitised_content(engine_none):
    first = engine_none.store("a", "  marker fact  ")
    again = engine_none.store("a", "[Memory from yesterday] marker fact")
    assert first["result"] == "stored"
    assert again["result"] == "skipped" and again["id"] == first["id"]
    assert _content_of(engine_none, first["id"]) == "marker fact"


def test_episodes_have_no_dedup(engine_none):
    one = engine_none.archive_episode("a", "same summary")
    two = engine_none.archive_episode("a", "same summary")
    assert one["ok"] and two["ok"] and one["episode_id"] != two["episode_id"]
    assert engine_none.list_episodes("a")["count"] == 2


def test_skip_reports_existing_id_for_each_rule(engine_none):
    stored = engine_none.store("a", "echo me", msg_id="e1", project_id="", channel="")
    for kwargs in ({"msg_id": "e1"}, {"msg_id": "e1", "channel": "zz"}, {"project_id": "P"}, {"channel": "c9"}):
        res = engine_none.store("a", "echo me", **kwargs)
        assert res["result"] == "skipped", kwargs
        assert res["id"] == stored["id"], kwargs
    assert db_rows(engine_none.db.path, "SELECT COUNT(*) FROM memories") == [(1,)]


def test_vector_index_search_applies_every_axis():
    import numpy as np
    from cpersona.index.vector_index import VectorIndex

    index = VectorIndex(2)
    v = np.array([1.0, 0.0], np.float32)
    rows = [(1, "A", "", ""), (2, "A", "P", ""), (3, "A", "Q", ""), (4, "A", "", "c1"), (5, "A", "", "c2"), (6, "B", "", "")]
    for i, (row_id, agent, project, channel) in enumerate(rows):
        index.add(row_id, agent, project, channel, f"2026-01-01 00:00:0{i}", v)

    def ids(scope, **kw):
        return sorted(r for r, _ in index.search(v, scope, kw.get("window", 100), 0.0, kw.get("limit", 100)))

    assert ids(Scope("A")) == [1, 2, 3, 4, 5]
    assert ids(Scope("A", "")) == [1, 4, 5]
    assert ids(Scope("A", "P")) == [1, 2, 4, 5]
    assert ids(Scope("A", "ZZ")) == [1, 4, 5]
    assert ids(Scope("A", None, "c1")) == [1, 2, 3, 4]
    assert ids(Scope("A", "P", "c2")) == [1, 2, 5]
    assert ids(Scope("B")) == [6]
    assert ids(Scope("")) == []
    assert ids(Scope(None)) == [1, 2, 3, 4, 5, 6]
    assert ids(Scope("A", "P"), window=2) == [4, 5]  # the newest 2 rows inside the scope
