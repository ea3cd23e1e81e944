"""Export → import into an empty database → export again gives the same rows, for random
corpora (hypothesis): content, message ids, timestamps, source, metadata, channel,
project_id, locked, recall statistics, created_at, resolved, keywords, profiles."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import new_engine

TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=60).map(str.strip).filter(
    lambda t: t and "[Memory from" not in t)
AGENTS = st.sampled_from(["a", "b", "", "エージェント"])
PROJECTS = st.sampled_from(["", "p", "日本"])
CHANNELS = st.sampled_from(["", "#c", "#d"])
STAMP = st.one_of(st.just(""), st.datetimes().map(lambda d: d.isoformat() + "Z"))
SQL_TIME = st.datetimes().map(lambda d: d.strftime("%Y-%m-%d %H:%M:%S"))
JSON_VALUE = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | TEXT,
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                          max_leaves=6)
MEMORY = st.fixed_dictionaries({
    "agent_id": AGENTS, "project_id": PROJECTS, "channel": CHANNELS, "msg_id": st.one_of(st.just(""), TEXT),
    "content": TEXT, "source": st.dictionaries(TEXT, JSON_VALUE, max_size=3).map(json.dumps),
    "timestamp": STAMP, "metadata": st.dictionaries(TEXT, JSON_VALUE, max_size=3).map(json.dumps),
    "locked": st.integers(0, 1), "recall_count": st.integers(0, 5),
    "last_recalled_at": st.one_of(st.none(), SQL_TIME), "created_at": SQL_TIME,
})
EPISODE = st.fixed_dictionaries({
    "agent_id": AGENTS, "project_id": PROJECTS, "channel": CHANNELS, "summary": TEXT,
    "keywords": st.lists(st.text("abcdefg", min_size=1, max_size=6), max_size=4).map(" ".join),
    "start_time": st.one_of(st.none(), STAMP.filter(bool)), "end_time": st.one_of(st.none(), STAMP.filter(bool)),
    "resolved": st.integers(0, 1), "created_at": SQL_TIME,
})
PROFILE = st.fixed_dictionaries({"agent_id": AGENTS, "user_id": st.sampled_from(["", "u1"]), "content": TEXT,
                                 "updated_at": SQL_TIME, "project_id": PROJECTS})


def _unique(rows: list[dict], *keys: str) -> list[dict]:
    seen, out = set(), []
    for row in rows:
        key = tuple(row[k] for k in keys)
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


def _lines(path: Path) -> list[dict]:
    drop = ("id", "exported_at")
    return [{k: v for k, v in json.loads(x).items() if k not in drop} for x in path.read_text("utf-8").splitlines()]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(memories=st.lists(MEMORY, max_size=12), episodes=st.lists(EPISODE, max_size=5),
       profiles=st.lists(PROFILE, max_size=4))
def test_export_import_export_is_lossless(memories, episodes, profiles):
    memories = _unique(_unique(memories, "agent_id", "project_id", "channel", "content"), "agent_id", "project_id",
                       "msg_id")
    memories = [m for m in memories if m["msg_id"]] + _unique([m for m in memories if not m["msg_id"]], "content",
                                                              "agent_id", "project_id", "channel")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        first = new_engine(folder / "a.db", max_metadata_length=100_000)
        second = new_engine(folder / "b.db", max_metadata_length=100_000)
        try:
            with first.db.write() as s:
                for m in memories:
                    if not (m["msg_id"] and s.bulk.msg_id_taken(m["agent_id"], m["project_id"], m["msg_id"])):
                        s.bulk.insert_memory(m, None)
                for e in _unique(episodes, "agent_id", "project_id", "channel", "summary"):
                    s.bulk.insert_episode(e, None)
                for p in profiles:
                    s.bulk.put_profile(p["agent_id"], p["user_id"], p["content"], p["updated_at"], p["project_id"])
            one, two = folder / "one.jsonl", folder / "two.jsonl"
            first.export_memories("", str(one), confined=False)
            res = second.import_memories(str(one), confined=False)
            assert res["ok"] and "errors" not in res, res
            second.export_memories("", str(two), confined=False)
            assert _lines(two) == _lines(one)
            again = second.import_memories(str(one), confined=False)
            assert (again["imported_memories"], again["imported_episodes"], again["profile_updated"]) == (0, 0, False)
        finally:
            first.close()
            second.close()
