"""Checks on the text of memories and profiles: each defect written into a temp file,
reported with its severity, repaired, gone — and locked rows left exactly as they were."""

from __future__ import annotations

import pytest
from cpersona.storage.scope import Scope

from health_helpers import add_memory, cycle, find, memory, one, raw, rows

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends


def test_memory_annotation_markers_are_stripped(engine_none):
    a = add_memory(engine_none, "[Memory from Bob] the staging DB moved to port 5433")
    locked = add_memory(engine_none, "[Memory from Ann] locked text", locked=1)
    before_locked = memory(engine_none, locked)
    before, during, _ = cycle(engine_none, "memory_annotation", "memory_annotation", "info", locked=1)
    assert before["count"] == 2 and before["locked"] == 1 and before["repairable"] == 1
    assert during["rewritten"] == 1
    assert memory(engine_none, a)[4] == "the staging DB moved to port 5433"
    assert memory(engine_none, locked) == before_locked
    # the rewritten text is searchable (FTS followed by trigger)
    with engine_none.db.read() as s:  # the trigram index follows (FTS5, or pg_trgm)
        assert [r.id for r, _ in s.search.memories_fts('"5433"', Scope(None), "", 10)] == [a]


def test_rewrite_colliding_with_an_existing_row_deletes_the_copy(engine_none):
    engine_none.store("kai", "deploys on thursday")
    dup = add_memory(engine_none, "[Memory from Bob] deploys on thursday")
    _, during, _ = cycle(engine_none, "memory_annotation", "memory_annotation", "info")
    assert during["deleted"] == 1 and memory(engine_none, dup) is None
    assert rows(engine_none, "SELECT COUNT(*) FROM memories WHERE content = 'deploys on thursday'") == [(1,)]


def test_discord_mentions_are_stripped(engine_none):
    a = add_memory(engine_none, "<@123456> please rotate the API key <@!98765>")
    locked = add_memory(engine_none, "<@42> locked mention", locked=1)
    before_locked = memory(engine_none, locked)
    before, _, _ = cycle(engine_none, "discord_mention", "discord_mention", "info", locked=1)
    assert before["repairable"] == 1 and before["locked"] == 1
    assert memory(engine_none, a)[4] == "please rotate the API key"
    assert memory(engine_none, locked) == before_locked


def test_oversized_content_is_truncated(make_engine):
    engine = make_engine(max_content_length=20)
    a = add_memory(engine, "x" * 50)
    locked = add_memory(engine, "y" * 60, locked=1)
    before_locked = memory(engine, locked)
    before, _, _ = cycle(engine, "oversized_content", "oversized_content", "warn", locked=1)
    assert before["max_len"] == 20 and before["repairable"] == 1
    assert memory(engine, a)[4] == "x" * 20
    assert memory(engine, locked) == before_locked


def test_duplicates_across_channels_keep_the_channel_less_row(engine_none):
    glob = add_memory(engine_none, "same fact")
    copy = add_memory(engine_none, "same fact", channel="#alerts")
    locked = add_memory(engine_none, "same fact", channel="#ops", locked=1)
    before_locked = memory(engine_none, locked)
    before = one(engine_none.check_health(checks=["duplicate_content"]), "duplicate_content")
    assert before["severity"] == "warn" and before["groups"] == 1 and before["total_extra"] == 2
    assert before["repairable"] == 1
    fixed = one(engine_none.check_health(checks=["duplicate_content"], fix=True), "duplicate_content")
    assert fixed["fixed"] == 1
    assert memory(engine_none, copy) is None and memory(engine_none, glob) is not None
    assert memory(engine_none, locked) == before_locked
    # only the locked copy is left beside the global row: nothing automatic applies any more
    left = one(engine_none.check_health(checks=["duplicate_content"]), "duplicate_content")
    assert left["repairable"] == 0 and left["needs_human_review"] is True and left["severity"] == "info"


def test_duplicates_without_a_channel_less_row_are_left_for_a_person(engine_none):
    add_memory(engine_none, "told twice", channel="#a")
    add_memory(engine_none, "told twice", channel="#b")
    issue = one(engine_none.check_health(checks=["duplicate_content"], fix=True), "duplicate_content")
    assert issue["without_global_copy"] == 1 and issue["repairable"] == 0 and issue["needs_human_review"]
    assert "fixed" not in issue
    assert rows(engine_none, "SELECT COUNT(*) FROM memories")[0][0] == 2


def test_blank_content_is_deleted(engine_none):
    blank = add_memory(engine_none, "   \n\t ")
    ideographic = add_memory(engine_none, "\u3000")
    locked = add_memory(engine_none, "  ", locked=1, channel="#x")
    before, during, _ = cycle(engine_none, "empty_content", "empty_content", "warn", locked=1)
    assert before["count"] == 3 and before["repairable"] == 2 and during["fixed"] == 2
    assert memory(engine_none, blank) is None and memory(engine_none, ideographic) is None
    assert memory(engine_none, locked) is not None


def test_oversized_profile_is_truncated(make_engine):
    engine = make_engine(max_profile_length=10)
    raw(engine, "INSERT INTO profiles(agent_id, content) VALUES ('kai', ?)", ("a" * 40,))
    before, _, _ = cycle(engine, "oversized_profile", "oversized_profile", "warn")
    assert before["profiles"][0]["length"] == 40
    assert rows(engine, "SELECT content FROM profiles WHERE agent_id = 'kai'") == [("a" * 10,)]


def test_agent_scope_limits_reports_and_repairs(engine_none):
    mine = add_memory(engine_none, "<@1> mine", agent="kai")
    theirs = add_memory(engine_none, "<@2> theirs", agent="mika")
    report = engine_none.check_health(agent_id="kai", checks=["discord_mention"])
    assert one(report, "discord_mention")["count"] == 1
    engine_none.check_health(agent_id="kai", checks=["discord_mention"], fix=True)
    assert memory(engine_none, mine)[4] == "mine"
    assert memory(engine_none, theirs)[4] == "<@2> theirs"
    assert find(engine_none.check_health(checks=["discord_mention"]), "discord_mention")[0]["count"] == 1


@pytest.mark.sqlite_only("another program's BLOB or non-UTF-8 text in a TEXT column: SQLite does not check")
def test_content_that_is_not_utf8_text_is_rewritten_as_the_text_it_reads_as(engine_none):
    blob = add_memory(engine_none, b"deploy blob \xff payment")
    bad = raw(engine_none, "INSERT INTO memories (agent_id, content, timestamp) VALUES ('kai', CAST(? AS TEXT), '')",
              (b"deploy \xc3\x28 invalid",))
    locked = add_memory(engine_none, b"locked \xff", locked=1)
    fine = add_memory(engine_none, "ordinary text, café")
    nul = add_memory(engine_none, "a NUL\x00 inside")  # no write path of ours accepts one: an export would not import
    episode = raw(engine_none, "INSERT INTO episodes (agent_id, summary, keywords) VALUES ('kai', ?, '')",
                  (b"episode \xff summary",))
    before, during, _ = cycle(engine_none, "content_not_text", "content_not_text", "warn", locked=1)
    assert before["count"] == 4 and before["locked"] == 1 and before["episode_ids"] == [episode]
    assert during["rewritten"] == 3 and during["episodes_rewritten"] == 1
    assert rows(engine_none, "SELECT typeof(content), content FROM memories WHERE id IN (?, ?, ?) ORDER BY id",
                (blob, bad, nul)) == [("text", "deploy blob \ufffd payment"), ("text", "deploy \ufffd( invalid"),
                                      ("text", "a NUL inside")]
    assert rows(engine_none, "SELECT typeof(summary), summary FROM episodes WHERE id = ?", (episode,)) == [
        ("text", "episode \ufffd summary")]
    assert memory(engine_none, fine)[4] == "ordinary text, café"
    assert rows(engine_none, "SELECT typeof(content) FROM memories WHERE id = ?", (locked,)) == [("blob",)]
    with engine_none.db.read() as s:  # the rewritten text is searchable
        assert [r.id for r, _ in s.search.memories_fts('"payment"', Scope(None), "", 10)] == [blob]
