"""What a user switching from the original CPersona meets on the command line: restoring an
export with vectors into a new file, importing an old database and giving its rows vectors,
the messages of the row commands and of recall, a closed output pipe, and what `stats` says
of a file the original's 2.6 line wrote."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cpersona.cli import main, read
from cpersona.jobs.task_queue import TaskQueue

from conftest import clean_env, db_rows, new_engine

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures"


@pytest.fixture
def cli(cli_db, monkeypatch, capsys):
    """`cpersona ARGS` in-process on tmp_path/cli.db (mode none); returns (status, out, err)."""
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args, **env):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        status = main(list(args))
        out = capsys.readouterr()
        return status, out.out, out.err

    run.db = cli_db
    return run


def _original(tmp_path: Path, release: str = "2.6.14") -> Path:
    source = FIXTURES / f"original-{release}" / "memory.db"
    if not source.exists():
        pytest.skip("../shared/fixtures is absent")
    copy = tmp_path / f"old-{release}.db"
    shutil.copyfile(source, copy)
    copy.chmod(0o644)
    return copy


def test_an_export_with_vectors_restores_them_into_a_new_database(cli, tmp_path, fake_embed):
    http = {"CPERSONA_EMBEDDING_MODE": "http", "CPERSONA_EMBEDDING_URL": fake_embed.url}
    src = new_engine(tmp_path / "src.db", embedding_mode="http", embedding_url=fake_embed.url)
    for i in range(3):
        src.store("dev", f"dev fact {i} about the release train")
    src.close()
    export = tmp_path / "dev-emb.jsonl"
    assert cli("export", str(export), "--agent", "dev", "--embeddings", CPERSONA_DB_PATH=str(tmp_path / "src.db"),
               **http)[0] == 0
    status, out, _ = cli("import", str(export), "--json", CPERSONA_DB_PATH=str(cli.db), **http)
    res = json.loads(out)
    assert status == 0 and res["embeddings_kept"] == 3 and res["embeddings_dropped"] == 0
    assert db_rows(cli.db, "SELECT COUNT(*) FROM memories WHERE embedding IS NULL") == [(0,)]
    status, out, _ = cli("stats", "--json")
    assert json.loads(out)["stored_model"] == "fake-hash-512"


def test_an_imported_database_says_its_rows_need_vectors_and_plain_reembed_gives_them(cli, tmp_path, fake_embed):
    old = _original(tmp_path)
    status, out, _ = cli("import", "--from-db", str(old))  # mode none: no task is queued
    assert status == 0 and "10 of the imported memories and episodes have no vector yet" in out and "`cpersona reembed`" in out
    assert db_rows(cli.db, "SELECT COUNT(*) FROM pending_memory_tasks") == [(0,)]
    http = {"CPERSONA_EMBEDDING_MODE": "http", "CPERSONA_EMBEDDING_URL": fake_embed.url}
    status, out, _ = cli("recall", "deploy", "--agent", "kai", **http)
    assert status == 0 and "5 rows have no vector yet and are matched by keyword only" in out
    status, out, _ = cli("reembed")
    assert status == 0 and "embedded 10 of 10 rows without a vector" in out
    assert db_rows(cli.db, "SELECT COUNT(*) FROM memories WHERE embedding IS NULL") == [(0,)]
    assert db_rows(cli.db, "SELECT COUNT(*) FROM episodes WHERE embedding IS NULL") == [(0,)]
    assert "no vector yet" not in cli("recall", "deploy", "--agent", "kai")[1]


def test_reembed_runs_no_task_queue_worker_beside_it(cli, tmp_path, fake_embed, monkeypatch):
    """One that embedded the imported rows before the run counted them (a loaded machine)
    made `cpersona reembed` answer "embedded 0 of 0 rows without a vector"."""
    started: list[TaskQueue] = []
    monkeypatch.setattr(TaskQueue, "start", lambda queue: started.append(queue))
    assert cli("import", "--from-db", str(_original(tmp_path)))[0] == 0
    status, out, _ = cli("reembed", CPERSONA_EMBEDDING_MODE="http", CPERSONA_EMBEDDING_URL=fake_embed.url)
    assert status == 0 and "embedded 10 of 10 rows without a vector" in out and started == []


def test_a_locked_row_names_the_cli_command_that_unlocks_it(cli):
    assert cli("store", "the deploy key rotates monthly", "--agent", "kai", "--lock")[0] == 0
    status, _, err = cli("update", "mem:1", "the deploy key rotates weekly", "--agent", "kai")
    assert status == 1 and "run `cpersona unlock mem:1` first" in err and "unlock_memory" not in err
    status, _, err = cli("delete", "mem:1", "--agent", "someone-else")
    assert status == 1 and "not owned by agent 'someone-else'" in err


@pytest.mark.parametrize("args", [["list", "--json", "--limit", "500"], ["list", "--limit", "500"]])
def test_a_closed_output_pipe_ends_quietly(tmp_path, args):
    """JSON and rich's table output alike (rich's own handler exited with 1)."""
    db = tmp_path / "p.db"
    eng = new_engine(db)
    for i in range(300):
        eng.store("kai", f"note {i} about the staging cluster and its nightly backups")
    eng.close()
    env = clean_env(CPERSONA_DB_PATH=str(db), CPERSONA_EMBEDDING_MODE="none")
    # A pipe smaller than the output (Linux's default 64 KiB would hold it all, and the child could
    # finish writing before the read end closes): the writer must meet the closed end.
    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        pytest.skip("Linux only: sets a pipe's size")
    read_end, write_end = os.pipe()
    fcntl.fcntl(read_end, fcntl.F_SETPIPE_SZ, 4096)
    proc = subprocess.Popen([sys.executable, "-m", "cpersona", *args], env=env,
                            stdout=write_end, stderr=subprocess.PIPE, cwd=tmp_path)
    os.close(write_end)
    assert proc.stderr is not None
    with os.fdopen(read_end, "rb") as out:
        out.read(10)  # then closed, like `| head -c 10`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""


def test_an_empty_deep_recall_does_not_offer_deep_again(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    answers = {"me": {"messages": [], "withheld": {"rows": 2}}}
    read._print_recall("q", answers)
    assert "--deep halves the bar" in capsys.readouterr().out
    read._print_recall("q", answers, deep=True)
    out = capsys.readouterr().out
    assert "--deep halves the bar" not in out and "even at the half bar of --deep" in out


def test_stats_says_what_the_schema_version_of_an_original_file_means(cli, tmp_path):
    old = _original(tmp_path)
    status, out, _ = cli("stats", CPERSONA_DB_PATH=str(old))
    assert status == 0 and "v13 (this server's format; file stamped v21 by the original CPersona 2.6 line" in out
    status, out, _ = cli("stats", "--json", CPERSONA_DB_PATH=str(old))
    assert (json.loads(out)["schema"], json.loads(out)["file_schema_version"]) == (13, 21)
    older = _original(tmp_path, "2.5.4")
    status, out, _ = cli("stats", CPERSONA_DB_PATH=str(older))
    assert status == 0 and "v13, FTS5 on" in out  # the same format: nothing to explain
