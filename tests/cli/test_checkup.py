"""`cpersona checkup` / `python -m cpersona.checkup`: exit codes for cron, report-only by
default (nothing written, nothing created), the text and JSON reports, a damaged file."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys

import pytest
from cpersona.cli import main

from conftest import clean_env, db_rows, new_engine


@pytest.fixture
def cli(cli_db, capsys):
    """Run `cpersona checkup ARGS` in-process against tmp_path/cli.db; (status, stdout, stderr)."""

    def run(*args):
        status = main(["checkup", *args])
        out = capsys.readouterr()
        return status, out.out, out.err

    run.db = cli_db
    return run


def _store(db, *texts, **cols):
    engine = new_engine(db)
    for text in texts:
        engine.store("kai", text, source={"type": "User", "id": "u", "name": "U"})
    engine.update_profile("kai", "profile")
    engine.close()


def _raw(db, sql, params=()):
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql, params)
    conn.close()


def _digest(db) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


def test_healthy_file_exits_0_and_reports_without_writing(cli):
    _store(cli.db, "a fact")
    before = _digest(cli.db)
    status, out, err = cli()
    assert status == 0, out
    assert out.splitlines()[0].endswith("healthy") and out.splitlines()[-1] == "exit=0 (non-strict gate)"
    assert str(cli.db) in err  # the resolved path is announced when it came from the environment
    assert _digest(cli.db) == before


def test_warning_gates_only_with_strict(cli):
    _store(cli.db, "a fact")
    _raw(cli.db, "UPDATE memories SET metadata = '{bad json'")
    status, out, _ = cli()
    assert status == 0 and "[warn] invalid_json:" in out
    status, out, _ = cli("--strict")
    assert status == 1 and out.splitlines()[-1] == "exit=1 (strict gate)"


def test_critical_exits_2_and_fix_repairs_it(cli):
    _store(cli.db, "a fact", "another fact")
    _raw(cli.db, "UPDATE memories SET embedding = x'00112233445566' WHERE id = 1")
    status, out, _ = cli()
    assert status == 2 and "[critical] embedding_dimension_mismatch:" in out
    status, out, _ = cli("--fix")
    assert status == 0 and "(fix applied)" in out.splitlines()[0] and '"fixed": 1' in out
    assert cli()[0] == 0
    status, out, _ = cli("--fix")  # healthy now: nothing was repaired, and the summary says so
    assert status == 0 and "(nothing to repair)" in out.splitlines()[0]


def test_json_report_is_complete_and_parseable(cli):
    _store(cli.db, "a fact", "ok")
    status, out, _ = cli("--json", "--deep")
    report = json.loads(out)
    assert status == 0 and report["checkup"]["exit_code"] == 0 and report["checkup"]["db"] == str(cli.db)
    assert len(report["checks_run"]) == 33 and "stats" in report
    assert report["deep"]["kai"]["results"]["short_content"]["count"] == 1


def test_deep_findings_are_listed_per_agent(cli):
    _store(cli.db, "a fact", "ok")
    status, out, _ = cli("--deep", "--agent", "kai")
    assert status == 0 and '  deep kai short_content: {"count": 1' in out
    assert "  deep_check: 6 checks on 1 agent\n" in out


def test_a_clean_deep_run_says_it_ran(cli):
    """A fresh user saw no sign that `--deep` had run when it found nothing."""
    _store(cli.db, "The deploy to production runs every Thursday afternoon.")
    status, out, _ = cli("--deep", "--agent", "kai")
    assert status == 0 and "  deep_check: 6 checks on 1 agent\n  deep_check: nothing found\n" in out


def test_a_missing_database_exits_2_and_is_not_created(cli, tmp_path):
    missing = tmp_path / "nowhere" / "missing.db"
    status, out, err = cli("--db", str(missing))
    assert status == 2 and out == "" and "no database file" in err and "Traceback" not in err
    assert not missing.exists() and not missing.parent.exists()


def test_python_m_alias_and_a_damaged_file(tmp_path):
    from health.test_damaged_file import build, flip_middle

    db = build(tmp_path / "damaged.db")
    flip_middle(db)
    env = clean_env(CPERSONA_EMBEDDING_MODE="none")
    proc = subprocess.run([sys.executable, "-m", "cpersona.checkup", "--db", str(db)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "[critical] sqlite_integrity:" in proc.stdout and "unhealthy" in proc.stdout.splitlines()[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    fixed = subprocess.run([sys.executable, "-m", "cpersona", "checkup", "--fix", "--json", "--db", str(db)],
                           env=env, capture_output=True, text=True, timeout=120)
    assert fixed.returncode == 2 and "Traceback" not in fixed.stdout + fixed.stderr
    assert json.loads(fixed.stdout)["severity_summary"]["critical"] >= 1


def test_deep_findings_are_reported_but_never_fixed_by_a_checkup(cli):
    """`--fix` repairs the store; it never deletes what the agent wrote (found by a new user:
    `checkup --deep --fix` deleted "東京在住" and "Vegan" as short_content)."""
    _store(cli.db, "東京在住", "Vegan", "a longer fact about the deploy pipeline")
    status, out, _ = cli("--deep", "--fix")
    assert status == 0 and "short_content" in out and "never acted on" in out
    assert [r[0] for r in db_rows(cli.db, "SELECT content FROM memories ORDER BY id")] == [
        "東京在住", "Vegan", "a longer fact about the deploy pipeline"]
