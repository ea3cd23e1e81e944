"""`cpersona context`, `cpersona forget`, the read commands saying who answered, and the
hook command's fast path importing nothing heavy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cpersona.cli import main
from cpersona.host import operations
from cpersona.host.local import host_context

from claude_transcript import a_session, hook_input
from conftest import clean_env, new_engine


@pytest.fixture
def cli(cli_db, capsys):
    """`cpersona ARGS` in-process on cli_db: (status, stdout, stderr); `cli.db` is the file."""
    def run(*args):
        return main(list(args)), *capsys.readouterr()

    run.db = cli_db
    return run


def test_context_prints_the_block_and_says_who_answered(cli):
    eng = new_engine(cli.db)
    eng.store("claude-code", "Production deploys run on Thursdays")
    eng.close()
    status, out, err = cli("context", "--query", "when do production deploys run?")
    assert status == 0 and "Thursdays" in out and out.startswith("<cpersona-memory>")
    assert "answered by this process, keyword only" in err
    status, out, _ = cli("context", "--query", "when do production deploys run?", "--json", "--budget", "20")
    answer = json.loads(out)
    assert answer["rows"] == 0 and answer["text"] == "" and answer["answered_by"].startswith("this process")
    status, out, _ = cli("context", "--agent", "nobody")
    assert status == 0 and out == ""
    status, _, err = cli("context", "--query", "x", "--budget", "-3")
    assert status == 1 and "budget" in err


def test_forget_removes_what_the_hooks_stored_for_a_session(cli, tmp_path):
    eng = new_engine(cli.db)
    t = a_session(tmp_path / "t.jsonl")
    ctx = host_context(eng.settings, eng)
    operations.run(ctx, "hook", {"event": "SessionEnd", "input": hook_input("SessionEnd", t, str(tmp_path))})
    eng.store("claude-code", "a row of my own")
    eng.lock_memory(1)
    eng.close()
    status, out, _ = cli("forget", "--session", t.session_id)
    assert "deleted 3 memories and 1 episodes" in out and "kept (locked" in out and status == 1
    eng = new_engine(cli.db)
    assert [m["content"] for m in eng.list_memories("claude-code")["memories"]][-1].startswith("Our production")
    assert eng.list_memories("claude-code")["count"] == 2 and eng.list_episodes("claude-code")["count"] == 0
    eng.close()
    status, _, err = cli("forget", "--session", "../etc")
    assert status == 1 and "session_id" in err


def test_read_commands_say_who_answered(cli):
    eng = new_engine(cli.db)
    eng.store("kai", "The staging cluster moves to eu-west-2")
    eng.close()
    status, out, err = cli("recall", "staging cluster", "--agent", "kai", "--json")
    assert status == 0 and json.loads(out)["answered_by"].startswith("this process")
    status, out, err = cli("list")
    assert status == 0 and "answered by this process" in out and err == ""


def test_the_hook_fast_path_imports_no_heavy_package(tmp_path):
    """The hook command with a server answering must not import pydantic, numpy or mcp; the
    probe replaces the server's answer with an in-process fake and lists what was imported."""
    probe = (
        "import sys, io, json\n"
        "from cpersona.util import local_channel\n"
        "local_channel.ask_server = lambda *a, **k: {'ok': True, 'output': 'ctx', 'note': 'n'}\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(b'{}'))\n"
        "from cpersona.cli import main\n"
        "main(['hook', 'UserPromptSubmit'])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'numpy', 'mcp', 'rich', 'httpx2'})\n"
        "print(json.dumps(heavy))\n"
    )
    env = clean_env(XDG_STATE_HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    printed, heavy = proc.stdout.splitlines()
    assert printed == "ctx" and json.loads(heavy) == []
