"""Recall's filters and listings through `Engine.recall`: a blank query lists the most recent
rows, `exclude_contents` drops given texts, `source_id` filters by prefix (and the original's
source shape is normalised)."""

from __future__ import annotations

import pytest

from quality_helpers import contents, recall, store_all

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends


# ---------------------------------------------------------- blank = recency
def test_blank_query_lists_most_recent_oldest_first(engine_none):
    store_all(engine_none, [f"recency row {i}" for i in range(6)])
    engine_none.archive_episode("a", "an episode is not part of the recency listing")
    for blank in ("", "   "):
        res = recall(engine_none, blank, limit=3)
        assert contents(res) == ["recency row 3", "recency row 4", "recency row 5"]
        assert all("match_reason" not in m for m in res["messages"])


def test_blank_query_respects_scope(engine_none):
    engine_none.store("a", "mine", channel="c1")
    engine_none.store("b", "theirs")
    engine_none.store("a", "other channel", channel="c2")
    assert contents(recall(engine_none, "", channel="c1")) == ["mine"]


# --------------------------------------------------------- exclude_contents
def test_exclude_contents(engine_none):
    long_row = "excl-3 long fact about the migration plan for the billing database cluster"
    store_all(engine_none, ["excl-3 fact one", "excl-3 fact two", long_row])
    all_rows = set(contents(recall(engine_none, "excl-3")))
    assert len(all_rows) == 3

    res = recall(engine_none, "excl-3", exclude_contents=("  EXCL-3 FACT TWO ",))
    assert set(contents(res)) == all_rows - {"excl-3 fact two"}

    # short entries (< 32 chars) exclude only exact equals, not prefixes
    res = recall(engine_none, "excl-3", exclude_contents=("excl-3 fact",))
    assert set(contents(res)) == all_rows

    # long entries exclude by prefix in both directions
    res = recall(engine_none, "excl-3", exclude_contents=(long_row[:40],))
    assert set(contents(res)) == all_rows - {long_row}
    res = recall(engine_none, "excl-3", exclude_contents=(long_row + " and some trailing words",))
    assert set(contents(res)) == all_rows - {long_row}

    # blank entries are ignored
    assert set(contents(recall(engine_none, "excl-3", exclude_contents=("", "  ")))) == all_rows


# ------------------------------------------------------------- source_id
def test_source_id_prefix_filter(engine_none):
    e = engine_none
    e.store("a", "srcf-9 one", source={"type": "User", "id": "discord:12_3", "name": "u"})
    e.store("a", "srcf-9 two", source={"type": "User", "id": "discord:1293", "name": "v"})
    e.store("a", "srcf-9 three", source={"type": "User", "id": "slack:12_3", "name": "w"})
    e.store("a", "srcf-9 four")
    e.archive_episode("a", "srcf-9 episode")

    assert set(contents(recall(e, "srcf-9"))) == {
        "srcf-9 one", "srcf-9 two", "srcf-9 three", "srcf-9 four", "[Episode] srcf-9 episode"
    }
    assert contents(recall(e, "srcf-9", source_id="discord:12_3")) == ["srcf-9 one"]  # '_' is literal
    assert set(contents(recall(e, "srcf-9", source_id="discord:"))) == {"srcf-9 one", "srcf-9 two"}
    assert recall(e, "srcf-9", source_id="teams:")["messages"] == []
    # with a channel, channel-scoped episodes come back
    assert set(contents(recall(e, "srcf-9", source_id="discord:12", channel="c1"))) == {
        "srcf-9 one", "srcf-9 two", "[Episode] srcf-9 episode"
    }
    assert set(contents(recall(e, "", source_id="slack:"))) == {"srcf-9 three"}


def test_legacy_source_shape_is_normalised(engine_none):
    engine_none.store("a", "legacy-1 row", source={"User": "discord:5"})
    (msg,) = recall(engine_none, "legacy-1")["messages"]
    assert msg["source"] == {"type": "User", "id": "discord:5", "name": "discord:5"}
    assert contents(recall(engine_none, "legacy-1", source_id="discord:5")) == ["legacy-1 row"]
