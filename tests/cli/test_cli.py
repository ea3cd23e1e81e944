"""The human CLI (`cpersona stats | list | recall | store`) on the same core as the tools."""

from __future__ import annotations

import pytest
from cpersona.cli import main

from conftest import db_rows, new_engine


@pytest.fixture
def cli(cli_db, monkeypatch, capsys):
    """Run `cpersona ARGS` in-process against tmp_path/cli.db; returns (status, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "200")  # rich: one table row per line

    def run(*args):
        status = main(list(args))
        out = capsys.readouterr()
        return status, out.out, out.err

    run.db = cli_db
    return run


def test_read_commands_refuse_a_missing_database(cli):
    for command in ("stats", "list"):
        status, out, err = cli(command)
        assert status == 1 and out == "" and "no database at" in err
    assert not cli.db.exists()  # nothing was created


def test_store_list_recall_stats(cli):
    status, out, _ = cli("store", "The staging cluster moves to eu-west-2", "--agent", "kai")
    assert status == 0 and out.strip() == "stored mem:1 for agent 'kai'"
    assert cli("store", "梅雨は北海道を除く日本で見られる")[1].strip() == "stored mem:2 for agent 'kai'"  # the only agent
    assert cli("store", "release notes live in docs/", "--agent", "mio", "--project", "web")[0] == 0
    status, out, _ = cli("store", "The staging cluster moves to eu-west-2", "--agent", "kai")
    assert status == 0 and out.strip() == "skipped: duplicate content (existing mem:1)"
    status, _, err = cli("store", "which agent?")
    assert status == 1 and "several agents" in err and "'kai'" in err and "'mio'" in err
    status, _, err = cli("store", "   ", "--agent", "kai")
    assert status == 1 and "rejected" in err and "message.content" in err
    assert db_rows(cli.db, "SELECT source FROM memories WHERE id = 1")[0][0].startswith('{"type": "User", "id": "cli"')

    status, out, _ = cli("list")
    assert status == 0 and "newest first (3 shown)" in out
    lines = [line for line in out.splitlines() if "│" in line]
    assert [line.split("│")[2].strip() for line in lines] == ["mio", "kai", "kai"]
    assert "release notes live in docs/" in lines[0] and "web" in lines[0]
    assert "kai" not in cli("list", "--agent", "mio")[1].replace("(1 shown)", "")

    status, out, _ = cli("recall", "staging cluster", "--agent", "kai")
    assert status == 0 and "mem:1" in out and "eu-west-2" in out and "best match first" in out
    assert "keyword" in out  # the degraded-search note (mode none)
    out = cli("recall", "docs")[1]  # no --agent: every agent
    assert "mio" in out and "mem:3" in out
    assert cli("recall", "zebra crossing", "--agent", "kai")[1].startswith("nothing relevant found")
    assert cli("recall")[0] == 2  # bad usage: the query is required
    assert "note: agent 'kia' has no memories" in cli("recall", "staging", "--agent", "kia")[1]  # a misspelt agent
    status, _, err = cli("list", "--limit", "0")  # 0 rows would read as an empty store
    assert status == 2 and "--limit: must be at least 1, got 0" in err
    status, _, err = cli("recall", "staging", "--limit", "101")
    assert status == 2 and "--limit: must be between 1 and 100, got 101" in err

    status, out, _ = cli("stats")
    assert status == 0
    assert str(cli.db) in out and "v13, FTS5 on" in out
    assert "none (keyword search only)" in out and "none recorded yet" in out
    assert "0 pending, 0 failed, 0 retries" in out
    kai = next(line for line in out.splitlines() if "│ kai " in line)
    assert [cell.strip() for cell in kai.split("│")[1:6]] == ["kai", "2", "0", "2", "0"]  # memories, locked, no vector, episodes
    assert "2 agents" in out


def test_recall_says_which_identifier_no_row_mentions(cli):
    """A question about an identifier that no matched row mentions answers nothing and says
    so (retrieval/anchors.py), instead of the generic 'matched too weakly'."""
    assert cli("store", "The staging cluster eu-west-2 runs CVE-2024-3094 scans nightly", "--agent", "kai")[0] == 0
    out = cli("recall", "does the staging cluster run CVE-2024-3095 scans?", "--agent", "kai")[1]
    assert out.startswith("nothing relevant found")
    assert "1 row held back — none of the matched rows mentions CVE-2024-3095" in out
    assert "CVE-2024-3094 scans" in cli("recall", "does the staging cluster run CVE-2024-3094 scans?", "--agent", "kai")[1]


def test_recall_over_every_agent_says_nothing_matched_only_when_no_agent_answered(cli):
    """The agents without a candidate must not contradict the rows of one that answered
    (found by a new user: three rows, then "no stored row … shares a word")."""
    assert cli("store", "Ken's manager is Aiko Suzuki", "--agent", "ken")[0] == 0
    assert cli("store", "lunch is at noon", "--agent", "other")[0] == 0
    out = cli("recall", "who is the manager?")[1]
    assert "Aiko Suzuki" in out and "no stored row" not in out
    nothing = cli("recall", "zebra crossing")[1]
    assert nothing.startswith("nothing relevant found") and "no stored row in this scope" in nothing


def test_stats_shows_the_vector_model_and_queue(cli, fake_embed):
    eng = new_engine(cli.db, embedding_mode="http", embedding_url=fake_embed.url, task_queue_enabled=False)
    eng.store("kai", "embedded row")
    fake_embed.fail = True
    eng.store("kai", "row waiting for its vector")
    fake_embed.fail = False
    eng.lock_memory(1)
    eng.close()
    status, out, _ = cli("stats")
    assert status == 0
    assert "1 pending, 0 failed" in out
    assert "fake-hash-512 (512-d)" in out  # the recorded model of the stored vectors (announced by the server)
    kai = next(line for line in out.splitlines() if "│ kai " in line)
    assert [cell.strip() for cell in kai.split("│")[1:5]] == ["kai", "2", "1", "1"]
    assert "1 agent " in out and "1 agents" not in out  # the total row


def test_cli_store_obeys_the_operating_context_registry(cli, tmp_path, monkeypatch):
    context = tmp_path / "context.toml"
    context.write_text('version = 1\n[registry]\nproject_ids = ["", "ops"]\nenforce = "reject"\n', encoding="utf-8")
    monkeypatch.setenv("CPERSONA_OPERATING_CONTEXT_PATH", str(context))
    status, out, err = cli("store", "deploy notes for the web team", "--agent", "kai", "--project", "web")
    assert status == 1 and "not in registry" in err and out == ""
    assert not cli.db.exists() or db_rows(cli.db, "SELECT COUNT(*) FROM memories") == [(0,)]
    status, out, _ = cli("store", "deploy notes for the ops team", "--agent", "kai", "--project", "ops")
    assert status == 0 and "stored mem:1" in out


def test_recall_json_is_best_match_first_like_the_table(cli):
    import json

    for text in ("The staging cluster moves to eu-west-2 next week", "the staging cluster was rebuilt",
                 "cluster of grapes"):
        assert cli("store", text, "--agent", "kai")[0] == 0
    status, out, _ = cli("recall", "staging cluster", "--agent", "kai", "--json")
    messages = json.loads(out)["messages"]
    assert status == 0 and len(messages) >= 2
    scores = [m["match_reason"]["score"] for m in messages]
    assert scores == sorted(scores, reverse=True)


def test_a_listing_keeps_room_for_the_text_in_80_columns(cli, monkeypatch):
    """A fresh user's `cpersona list` in an 80-column terminal cut each memory to ~6
    characters: columns no row of the page uses are left out, the others are capped."""
    text = "The deploy to production runs every Thursday afternoon after the review."
    assert cli("store", text, "--agent", "team-assistant-with-a-long-name")[0] == 0
    monkeypatch.setenv("COLUMNS", "80")
    status, out, _ = cli("list")
    assert status == 0 and all(len(line) <= 80 for line in out.splitlines())
    header = next(line for line in out.splitlines() if "content" in line)
    assert "project" not in header and "channel" not in header and "lock" not in header
    body = " ".join(line.split("│")[-2].strip() for line in out.splitlines() if line.count("│") > 2)
    assert "The deploy to production runs every" in body
