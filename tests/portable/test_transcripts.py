"""Reading a Claude Code transcript into verbatim turns (portable/transcripts.py)."""

from __future__ import annotations

from cpersona.portable.transcripts import last_compaction, last_turns, read_turns

from claude_transcript import Transcript, a_session


def test_turns_in_order_verbatim_with_host_lines_passed_over(tmp_path):
    t = a_session(tmp_path / "t.jsonl")
    reading = read_turns(t.path, tool_chars=100)
    assert [turn.role for turn in reading.turns] == ["user", "assistant", "user", "assistant"]
    user, reply = reading.turns[0], reading.turns[1]
    assert user.text.startswith("Our production deploys run every Thursday") and user.timestamp.startswith("2025")
    assert user.uuid and reply.uuid and user.uuid != reply.uuid and reply.tools == 1
    assert reply.text.splitlines()[0] == "Noted: production deploys on Thursdays at 14:00. Let me look at the pipeline."
    kept = reply.text.split("[tool output] ")[1].split("\nThe pipeline")[0]
    assert len(kept) == 100 and "more characters of tool output not kept" in reply.text
    assert reading.resume_at == t.path.stat().st_size and reading.bad_lines == 0


def test_resuming_reads_only_what_was_added_and_waits_for_a_reply_to_finish(tmp_path):
    t = Transcript(tmp_path / "t.jsonl")
    t.user("first question", minute=1)
    t.assistant("first answer, part one", minute=2, tool=("Read", {"file_path": "a.py"}))
    partial = read_turns(t.path, final=False)
    assert [x.role for x in partial.turns] == ["user"]  # the reply may go on
    t.assistant("part two", minute=3)
    with t.path.open("a", encoding="utf-8") as f:
        f.write('{"type": "user", "message": ')  # a line still being written: left for later
    rest = read_turns(t.path, partial.resume_at, final=True)
    assert [x.text for x in rest.turns] == ['first answer, part one\n[tool Read] {"file_path": "a.py"}\npart two']
    assert rest.resume_at < t.path.stat().st_size


def test_lines_that_are_not_json_objects_are_counted_and_skipped(tmp_path):
    t = Transcript(tmp_path / "t.jsonl")
    t.user("hello", minute=1)
    with t.path.open("a", encoding="utf-8") as f:
        f.write("not json\n[1, 2]\n" + "[" * 100000 + "\n")
    t.assistant("hi", minute=2)
    reading = read_turns(t.path)
    assert [x.text for x in reading.turns] == ["hello", "hi"] and reading.bad_lines == 3


def test_the_last_turns_and_the_last_compaction(tmp_path):
    t = a_session(tmp_path / "t.jsonl")
    assert last_compaction(t.path) == ""
    t.compaction(minute=40)
    t.user("after the compaction", minute=41)
    assert last_compaction(t.path) == "2025-03-04T10:40:30.000Z"
    assert [x.text for x in last_turns(t.path, 2)] == ["Understood: Aiko Suzuki approves releases.",
                                                        "after the compaction"]
    assert last_turns(tmp_path / "missing.jsonl", 2) == () and last_compaction(tmp_path / "missing.jsonl") == ""
