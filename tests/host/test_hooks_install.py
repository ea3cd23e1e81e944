"""`cpersona hooks install / uninstall / status` (host/settings_file.py, host/policy_snippet.py):
merged into Claude Code's settings JSON keeping everything else, idempotent, removed exactly —
and end to end: every command written into a settings file run exactly as written there."""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cpersona.host import policy_snippet, settings_file

from claude_transcript import Transcript, a_session, hook_input
from conftest import clean_env

#: The user's own settings: keys, another tool's hooks (also on an event cpersona uses).
THEIRS = {
    "model": "sonnet",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit.sh"}]}],
    },
}
START = ["/opt/venv/bin/cpersona"]


def test_install_adds_one_group_per_event_and_keeps_everything_else():
    merged, changes = settings_file.install(THEIRS, START)
    assert len(changes) == len(settings_file.EVENTS) and all(c.startswith("added ") for c in changes)
    assert merged["model"] == "sonnet" and merged["permissions"] == THEIRS["permissions"]
    assert merged["hooks"]["PreToolUse"] == THEIRS["hooks"]["PreToolUse"]
    assert merged["hooks"]["Stop"][0] == THEIRS["hooks"]["Stop"][0]  # theirs first, untouched
    assert merged["hooks"]["Stop"][1]["hooks"][0] == {"type": "command", "command": "/opt/venv/bin/cpersona hook Stop",
                                                      "timeout": 60, "async": True}
    assert merged["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    assert "matcher" not in merged["hooks"]["UserPromptSubmit"][0]
    assert settings_file.installed(merged) == {e: [f"/opt/venv/bin/cpersona hook {e}"] for e in settings_file.EVENTS}
    assert THEIRS["hooks"]["Stop"] == [{"hooks": [{"type": "command", "command": "notify-send done"}]}]  # not mutated
    again, changes = settings_file.install(merged, START)
    assert again == merged and changes == []  # idempotent
    moved, changes = settings_file.install(merged, ["/new venv/bin/cpersona"], agent="kai")
    assert len(changes) == len(settings_file.EVENTS) and all(c.startswith("updated ") for c in changes)
    assert moved["hooks"]["Stop"][1]["hooks"][0]["command"] == "'/new venv/bin/cpersona' hook Stop --agent kai"
    assert len(moved["hooks"]["Stop"]) == 2  # replaced in place, not added again


def test_uninstall_removes_exactly_cpersonas_commands():
    merged, _ = settings_file.install(THEIRS, START)
    merged["hooks"]["UserPromptSubmit"][0]["hooks"].append({"type": "command", "command": "mine.sh"})
    back, changes = settings_file.uninstall(merged)
    assert len(changes) == len(settings_file.EVENTS)
    assert back["hooks"]["UserPromptSubmit"] == [{"hooks": [{"type": "command", "command": "mine.sh"}]}]
    del back["hooks"]["UserPromptSubmit"]
    assert back == THEIRS
    assert settings_file.uninstall(back) == (back, [])
    only_ours, _ = settings_file.install({}, START)
    assert settings_file.uninstall(only_ours)[0] == {}


@pytest.mark.parametrize("command, event, expected", [
    ("/x/bin/cpersona hook Stop", "Stop", True),
    ("'/x y/cpersona' hook Stop --agent a", "Stop", True),
    ("/usr/bin/python3 -m cpersona hook Stop", "Stop", True),
    ("/x/bin/cpersona hook SessionEnd", "Stop", False),
    ("other-tool hook Stop", "Stop", False),
    ("echo cpersona hook", "Stop", False),
    (42, "Stop", False),
])
def test_which_commands_are_cpersonas(command, event, expected):
    assert settings_file.ours(command, event) is expected


def test_a_settings_file_of_the_wrong_shape_is_refused_and_left_alone(tmp_path):
    bad = tmp_path / "settings.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        settings_file.read(bad)
    with pytest.raises(ValueError, match="hooks"):
        settings_file.install({"hooks": []}, START)


def test_the_policy_snippet_is_written_once_between_markers():
    block = policy_snippet.snippet("claude-code", hooks=True)
    text, changed = policy_snippet.upsert("# Project\n\nRules.\n", block)
    assert changed and text.startswith("# Project\n\nRules.\n\n" + policy_snippet.START) and 'agent_id "claude-code"' in text
    assert policy_snippet.upsert(text, block) == (text, False)
    newer, changed = policy_snippet.upsert(text, policy_snippet.snippet("kai", hooks=False))
    assert changed and newer.count(policy_snippet.START) == 1 and 'agent_id "kai"' in newer
    assert policy_snippet.remove(newer) == ("# Project\n\nRules.\n", True)
    with pytest.raises(ValueError, match="broken"):
        policy_snippet.upsert(policy_snippet.START + "\n", block)


# ----------------------------------------------------------------------- end to end
def cpersona() -> list[str]:
    script = Path(sys.executable).parent / "cpersona"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cpersona"]


def test_install_then_run_every_command_exactly_as_written(tmp_path):
    settings = tmp_path / "claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(THEIRS), encoding="utf-8")
    state = tmp_path / "state"
    env = clean_env(CPERSONA_DB_PATH=str(tmp_path / "m.db"), CPERSONA_EMBEDDING_MODE="none",
                    XDG_STATE_HOME=str(state), HOME=str(tmp_path), CLAUDE_CONFIG_DIR=str(tmp_path / "claude"))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*cpersona(), *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)

    dry = run("hooks", "install", "--settings", str(settings), "--dry-run")
    assert dry.returncode == 0 and "would change" in dry.stdout and json.loads(settings.read_text()) == THEIRS
    done = run("hooks", "install", "--settings", str(settings))
    assert done.returncode == 0 and done.stdout.count("added ") == len(settings_file.EVENTS)
    assert "nothing to change" in run("hooks", "install", "--settings", str(settings)).stdout
    written = json.loads(settings.read_text(encoding="utf-8"))
    assert written["model"] == "sonnet" and written["hooks"]["PreToolUse"] == THEIRS["hooks"]["PreToolUse"]

    t = a_session(tmp_path / "t.jsonl")
    later = Transcript(tmp_path / "later.jsonl", session_id="9b9b9b9b-0000-4000-8000-000000000003")
    inputs = {
        "Stop": hook_input("Stop", t, str(tmp_path), stop_hook_active=False),
        "PreCompact": hook_input("PreCompact", t, str(tmp_path), trigger="manual", custom_instructions=""),
        "SessionEnd": hook_input("SessionEnd", t, str(tmp_path), reason="exit"),
        "SessionStart": hook_input("SessionStart", later, str(tmp_path), source="startup"),
        "UserPromptSubmit": hook_input("UserPromptSubmit", later, str(tmp_path), prompt="Who approves releases?"),
    }
    outputs = {}
    for event, data in inputs.items():  # the capture events first, so the readers find rows
        (command,) = settings_file.installed(written)[event]
        proc = subprocess.run(command, shell=True, input=json.dumps(data), capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outputs[event] = proc.stdout
    assert outputs["Stop"] == outputs["PreCompact"] == outputs["SessionEnd"] == ""
    start = json.loads(outputs["SessionStart"])["hookSpecificOutput"]
    assert start["hookEventName"] == "SessionStart" and "Aiko Suzuki" in start["additionalContext"]
    prompt = json.loads(outputs["UserPromptSubmit"])["hookSpecificOutput"]["additionalContext"]
    assert "Aiko Suzuki approves" in prompt
    log = (state / "cpersona" / "hooks.log").read_text(encoding="utf-8")
    assert "4 turns stored" in log and "secrets redacted: 1 anthropic key" in log and "sk-ant" not in log

    status = run("hooks", "status", "--json")
    assert status.returncode == 0
    user_file = next(f for f in json.loads(status.stdout)["settings_files"] if f["scope"] == "user")
    assert sorted(user_file["events"]) == sorted(settings_file.EVENTS)  # CLAUDE_CONFIG_DIR's settings.json
    gone = run("hooks", "uninstall", "--settings", str(settings))
    assert gone.returncode == 0 and json.loads(settings.read_text(encoding="utf-8")) == THEIRS

    # a broken input or a broken database: still exit 0, nothing on stdout, one log line each
    (command,) = settings_file.installed(written)["UserPromptSubmit"]
    for stdin in ("{not json", json.dumps({**inputs["UserPromptSubmit"], "session_id": "../x"})):
        proc = subprocess.run(command, shell=True, input=stdin, capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120)
        assert proc.returncode == 0 and proc.stdout == ""
    (tmp_path / "broken.db").write_bytes(b"this is not a database" * 100)
    proc = subprocess.run(command, shell=True, input=json.dumps(inputs["UserPromptSubmit"]), capture_output=True,
                          text=True, env={**env, "CPERSONA_DB_PATH": str(tmp_path / "broken.db")}, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout == ""
    tail = (state / "cpersona" / "hooks.log").read_text(encoding="utf-8").splitlines()[-3:]
    assert all("failed" in line for line in tail), tail


def test_codex_and_agents_md_get_the_snippet(tmp_path):
    env = clean_env(HOME=str(tmp_path), CODEX_HOME=str(tmp_path / "codex"), XDG_STATE_HOME=str(tmp_path / "s"))
    (tmp_path / "AGENTS.md").write_text("# Build\n\nmake test\n", encoding="utf-8")
    for args in (["--host", "codex"], ["--host", "agents-md", "--scope", "project"]):
        proc = subprocess.run([*cpersona(), "hooks", "install", *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
    assert policy_snippet.START in (tmp_path / "codex" / "AGENTS.md").read_text(encoding="utf-8")
    project = (tmp_path / "AGENTS.md").read_text(encoding="utf-8")
    assert project.startswith("# Build\n\nmake test\n") and project.count(policy_snippet.START) == 1
    proc = subprocess.run([*cpersona(), "hooks", "uninstall", "--host", "agents-md", "--scope", "project"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and (tmp_path / "AGENTS.md").read_text(encoding="utf-8") == "# Build\n\nmake test\n"
    proc = subprocess.run([*cpersona(), "hooks", "install", "--host", "agents-md", "--scope", "user"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "--scope project" in proc.stderr


@pytest.mark.skipif(not os.environ.get("CPERSONA_TEST_CLAUDE") or not shutil.which("script"),
                    reason="set CPERSONA_TEST_CLAUDE to a `claude` binary (npm i @anthropic-ai/claude-code) to run")
def test_claude_codes_own_settings_check_accepts_the_installed_files(tmp_path):
    """`claude doctor` lists every settings file it cannot accept under "Invalid settings"
    (user: $CLAUDE_CONFIG_DIR/settings.json, project and local in the working directory).
    It needs a terminal: run under `script`. A broken copy shows the check is really made."""
    claude = os.environ["CPERSONA_TEST_CLAUDE"]
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    env = clean_env(HOME=str(home), CLAUDE_CONFIG_DIR=str(tmp_path / "claude"), XDG_STATE_HOME=str(tmp_path / "s"),
                    DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    (tmp_path / "claude").mkdir()
    (tmp_path / "claude" / "settings.json").write_text(json.dumps(THEIRS), encoding="utf-8")
    for scope in ("user", "project", "local"):
        proc = subprocess.run([*cpersona(), "hooks", "install", "--scope", scope], capture_output=True, text=True,
                              env=env, cwd=project, timeout=120)
        assert proc.returncode == 0, proc.stderr

    def doctor() -> str:
        """The report of `claude doctor` up to its "Enter to close" prompt (then it is stopped)."""
        proc = subprocess.Popen(["script", "-qc", f"{shlex.quote(claude)} doctor", "/dev/null"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=project)
        seen, deadline = b"", time.monotonic() + 120
        try:
            while b"Entertoclose" not in seen and time.monotonic() < deadline:
                if select.select([proc.stdout], [], [], 1.0)[0]:
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    seen = re.sub(rb"\x1b\[[0-9;?]*[a-zA-Z]|\s", b"", seen + chunk)
        finally:
            proc.kill()
            proc.wait(30)
        return seen.decode("utf-8", "replace")

    report = doctor()
    assert "Diagnostics" in report and "Invalidsettings" not in report
    local = project / ".claude" / "settings.local.json"
    broken = json.loads(local.read_text(encoding="utf-8"))
    broken["hooks"]["Stop"][0]["hooks"][0]["timeout"] = "sixty"
    local.write_text(json.dumps(broken), encoding="utf-8")
    assert "Invalidsettings" in doctor()
