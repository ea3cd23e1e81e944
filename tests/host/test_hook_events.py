"""Each Claude Code hook event fed its documented stdin JSON and a transcript written in
Claude Code's format, answered through the real engine (host/claude_code.py, through the
endpoint's operation table as a server runs it): context output, stored rows, no duplicates
on a second run, redaction, the pause, malformed input."""

from __future__ import annotations

import json

import pytest
from cpersona.host import operations
from cpersona.host.claude_code import HOST
from cpersona.host.local import host_context

from claude_transcript import FAKE_KEY, Transcript, a_session, hook_input

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends


@pytest.fixture
def hooks(make_engine, tmp_path):
    """run(event, data) → the hook op's answer, on one engine (mode none)."""
    engine = make_engine()
    ctx = host_context(engine.settings, engine)

    def run(event: str, data: dict, **args) -> dict:
        return operations.run(ctx, "hook", {"event": event, "input": data, **args})

    run.engine = engine
    run.cwd = str(tmp_path)
    return run


def context_of(answer: dict, event: str) -> str:
    """The additionalContext of a hook's stdout, as Claude Code reads it ('' = nothing printed)."""
    assert answer["ok"], answer
    if not answer["output"]:
        return ""
    out = json.loads(answer["output"])
    assert out["hookSpecificOutput"]["hookEventName"] == event
    return out["hookSpecificOutput"]["additionalContext"]


def memories(engine) -> list[dict]:
    return engine.list_memories("claude-code", 500)["memories"][::-1]  # oldest first


def test_session_end_stores_each_turn_verbatim_once(hooks, tmp_path):
    t = a_session(tmp_path / "t.jsonl")
    answer = hooks("SessionEnd", hook_input("SessionEnd", t, hooks.cwd, reason="exit"))
    assert answer["ok"] and answer["output"] == ""
    assert "4 turns stored" in answer["note"] and "1 anthropic key" in answer["note"]
    assert FAKE_KEY not in answer["note"]
    rows = memories(hooks.engine)
    assert [r["source"]["type"] for r in rows] == ["User", "Agent", "User", "Agent"]
    assert {r["source"]["id"] for r in rows} == {f"{HOST}:{t.session_id}"}
    first, reply = rows[0]["content"], rows[1]["content"]
    assert first.startswith("Our production deploys run every Thursday at 14:00") and FAKE_KEY not in first
    assert "[redacted anthropic key]" in first
    assert rows[0]["timestamp"].startswith("2025-03-04T10:01")
    # the assistant turn: its texts, the tool call, the tool output cut to the setting; no thinking
    assert "Let me look at the pipeline." in reply and "The pipeline has a build and a deploy stage." in reply
    assert '[tool Bash] {"command": "cat deploy.yml"}' in reply and "stages: [build, deploy]" in reply
    assert "more characters of tool output not kept" in reply and "private reasoning" not in reply
    assert len(reply) < 8000 + 1000
    assert all("sub-agent" not in r["content"] and "Caveat" not in r["content"] for r in rows)
    # the session's episode: its first prompt and counts
    episodes = hooks.engine.list_episodes("claude-code", 10)["episodes"]
    assert len(episodes) == 1 and "2 user turns" in episodes[0]["summary"] and FAKE_KEY not in episodes[0]["summary"]
    # again (a resumed session ending, a second SessionEnd): nothing stored twice, no second episode
    assert "0 turns stored" in hooks("SessionEnd", hook_input("SessionEnd", t, hooks.cwd))["note"]
    assert len(memories(hooks.engine)) == 4 and len(hooks.engine.list_episodes("claude-code", 10)["episodes"]) == 1


def test_pre_compact_keeps_an_unfinished_reply_for_later(hooks, tmp_path):
    t = Transcript(tmp_path / "t.jsonl")
    t.user("What does the staging cluster run?", minute=1)
    call = t.assistant("Checking the cluster.", minute=2, tool=("Bash", {"command": "kubectl get pods"}))
    t.tool_result(call, "api-7d9 Running", minute=2)
    answer = hooks("PreCompact", hook_input("PreCompact", t, hooks.cwd, trigger="auto", custom_instructions=""))
    assert "1 turns stored" in answer["note"]  # the reply may still go on: not stored yet
    t.assistant("It runs the api service.", minute=3)
    t.user("Thanks.", minute=4)
    assert "2 turns stored" in hooks("Stop", hook_input("Stop", t, hooks.cwd, stop_hook_active=False))["note"]
    reply = memories(hooks.engine)[1]["content"]
    assert "Checking the cluster." in reply and "It runs the api service." in reply  # one turn, whole
    # the state file lost: the whole transcript is read again and nothing is stored twice
    state_file_of(hooks, t).unlink()
    assert "0 turns stored" in hooks("SessionEnd", hook_input("SessionEnd", t, hooks.cwd))["note"]
    assert len(memories(hooks.engine)) == 3


def state_file_of(hooks, t):
    from cpersona.host.capture_state import state_file
    from cpersona.util.places import db_target

    s = hooks.engine.settings
    return state_file(db_target(s.db_url, s.db_path).key, t.session_id)


def test_the_pause_stores_nothing_and_the_next_run_catches_up(hooks, tmp_path):
    t = a_session(tmp_path / "t.jsonl")
    hooks.engine.pause_persistence(600)
    answer = hooks("Stop", hook_input("Stop", t, hooks.cwd))
    assert "persistence paused" in answer["note"] and memories(hooks.engine) == []
    hooks.engine.resume_persistence()
    assert "4 turns stored" in hooks("Stop", hook_input("Stop", t, hooks.cwd))["note"]


def test_capture_can_be_turned_off(make_engine, tmp_path):
    engine = make_engine(hooks_capture=False)
    t = a_session(tmp_path / "t.jsonl")
    answer = operations.run(host_context(engine.settings, engine), "hook",
                            {"event": "SessionEnd", "input": hook_input("SessionEnd", t, str(tmp_path))})
    assert "capture off" in answer["note"] and engine.list_memories("claude-code")["count"] == 0


def test_user_prompt_gets_what_recall_passes_best_last_with_refs(hooks, tmp_path):
    old = a_session(tmp_path / "old.jsonl")
    hooks("SessionEnd", hook_input("SessionEnd", old, hooks.cwd))
    hooks.engine.store("claude-code", "The office plants are watered on Mondays")
    now = Transcript(tmp_path / "now.jsonl", session_id="5e1c0d3b-0000-4000-8000-000000000001")
    prompt = "Who approves a release?"
    now.user(prompt, minute=30)
    text = context_of(hooks("UserPromptSubmit", hook_input("UserPromptSubmit", now, hooks.cwd, prompt=prompt)),
                      "UserPromptSubmit")
    lines = [line for line in text.splitlines() if line.startswith("- [")]
    assert lines and "Aiko Suzuki approves" in lines[-1] and "[mem:" in lines[-1]  # best last, with its ref
    assert "plants" not in text  # recall's gate decides
    assert context_of(hooks("UserPromptSubmit", hook_input("UserPromptSubmit", now, hooks.cwd,
                                                           prompt="zebra crossing quantum")), "UserPromptSubmit") == ""


def test_a_prompt_block_leaves_out_this_sessions_turns_still_in_context(hooks, tmp_path):
    t = a_session(tmp_path / "t.jsonl")
    hooks("Stop", hook_input("Stop", t, hooks.cwd))
    data = hook_input("UserPromptSubmit", t, hooks.cwd, prompt="Who approves every release?")
    assert "Aiko" not in context_of(hooks("UserPromptSubmit", data), "UserPromptSubmit")
    t.compaction(minute=50)  # compacted: the turns before are out of the model's context now
    assert "Aiko Suzuki" in context_of(hooks("UserPromptSubmit", data), "UserPromptSubmit")


def test_session_start_brings_profile_episode_and_recent_rows_within_budget(make_engine, tmp_path):
    engine = make_engine(hooks_session_tokens=300)
    ctx = host_context(engine.settings, engine)
    t = a_session(tmp_path / "t.jsonl")
    operations.run(ctx, "hook", {"event": "SessionEnd", "input": hook_input("SessionEnd", t, str(tmp_path))})
    engine.update_profile("claude-code", "Prefers short answers. Works on the deploy pipeline.")
    new = Transcript(tmp_path / "new.jsonl", session_id="7a7a7a7a-0000-4000-8000-000000000002")
    answer = operations.run(ctx, "hook", {"event": "SessionStart",
                                          "input": hook_input("SessionStart", new, str(tmp_path), source="startup")})
    text = context_of(answer, "SessionStart")
    assert "Prefers short answers" in text and "[ep:1" in text and "session " + t.session_id in text
    assert "[mem:" in text
    assert len(text.encode()) <= 300 * 3  # the budget: tokens estimated as UTF-8 bytes / 3
    empty = make_engine("empty.db")
    answer = operations.run(host_context(empty.settings, empty), "hook",
                            {"event": "SessionStart", "input": hook_input("SessionStart", new, str(tmp_path))})
    assert answer["ok"] and answer["output"] == ""  # nothing stored: nothing printed


def test_the_agent_is_the_setting_or_the_commands_own(hooks, tmp_path):
    t = a_session(tmp_path / "t.jsonl")
    hooks("Stop", hook_input("Stop", t, hooks.cwd), agent="kai")
    assert hooks.engine.list_memories("kai")["count"] == 4 and memories(hooks.engine) == []


@pytest.mark.parametrize("event, data, needle", [
    ("Nonsense", {}, "event: must be one of"),
    ("SessionStart", ["not", "an", "object"], "input: must be a JSON object"),
    ("Stop", {"session_id": "../../etc/passwd", "transcript_path": "/x", "cwd": "/"}, "session_id"),
    ("UserPromptSubmit", {"session_id": "s1", "prompt": 7, "cwd": "/", "transcript_path": ""}, "prompt"),
])
def test_malformed_input_is_an_answer_not_an_exception(hooks, event, data, needle):
    answer = hooks(event, data)
    assert answer["ok"] is False and needle in answer["error"]


def test_a_missing_transcript_is_reported(hooks, tmp_path):
    answer = hooks("SessionEnd", {"session_id": "s1", "transcript_path": str(tmp_path / "gone.jsonl"),
                                  "cwd": hooks.cwd, "hook_event_name": "SessionEnd"})
    assert answer["ok"] is False and "transcript_path" in answer["error"] and "gone.jsonl" in answer["error"]
