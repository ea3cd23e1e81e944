"""`cpersona export | import | merge | migrate-channel-axis | backup | restore`: their --help,
the one-line answers, exit codes 0 / 1 / 2, and a backup that brings back the side files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cpersona.cli import main

from conftest import assert_one_line_error, clean_env, db_rows, new_engine

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures"
COMMANDS = ("export", "import", "merge", "migrate-channel-axis", "backup", "restore")


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """Run `cpersona ARGS` in-process against tmp_path/cli.db; returns (status, stdout, stderr)."""
    for key in list(os.environ):
        if key.startswith(("CPERSONA_", "EMBEDDING_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("CPERSONA_DB_PATH", str(tmp_path / "cli.db"))
    monkeypatch.setenv("CPERSONA_EMBEDDING_MODE", "none")
    monkeypatch.setenv("CPERSONA_OPERATING_CONTEXT_PATH", str(tmp_path / "ctx.toml"))

    def run(*args):
        status = main(list(args))
        out = capsys.readouterr()
        return status, out.out, out.err

    run.db = tmp_path / "cli.db"
    return run


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_its_own_help(cli, command):
    status, out, _ = cli(command, "--help")
    assert status == 0 and f"cpersona {command}" in out


def test_import_export_merge_with_one_line_answers(cli, tmp_path):
    export = FIXTURES / "original-2.5.4" / "export-kai.jsonl"
    if not export.exists():
        pytest.skip("../shared/fixtures is absent")
    status, out, _ = cli("import", str(export), "--dry-run")
    assert status == 0 and out.startswith("would import 5 memories (0 skipped), 1 episodes")
    assert not cli.db.exists()  # a dry run into a store that does not exist yet creates none (a new user's find)
    status, out, _ = cli("import", str(export))
    assert status == 0 and out.startswith("imported 5 memories")
    status, out, _ = cli("import", "--from-db", str(FIXTURES / "original-2.6.14" / "memory.db"), "--json")
    assert status == 0 and json.loads(out)["imported_memories"] == 3  # kai's five are there already
    status, out, _ = cli("export", str(tmp_path / "out" / "kai.jsonl"), "--agent", "kai")
    assert status == 0 and out.strip() == f"exported 5 memories, 1 episodes, 1 profiles to {tmp_path / 'out' / 'kai.jsonl'}"
    status, out, _ = cli("merge", "kai", "kai2", "--move")
    assert status == 0 and "merged 5 memories (0 skipped)" in out and "'kai' to 'kai2'" in out
    status, out, _ = cli("migrate-channel-axis")
    assert status == 0 and "report only" in out


def test_bad_input_is_one_line_and_exit_1(cli, tmp_path):
    status, _, err = cli("export", str(tmp_path / "x.jsonl"))
    assert status == 1 and "no database at" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"_type": "header", "version": "cpersona-export/1.0", "memory_count": 1}\n{"_type": "mem')
    status, out, err = cli("import", str(bad))
    assert status == 1 and out == "" and len(err.strip().splitlines()) == 1 and "line 2: not valid JSON" in err
    status, _, err = cli("import")
    assert status == 1 and "name one file" in err
    status, _, err = cli("import", "--from-db", str(bad))
    assert status == 1 and "not a SQLite database" in err
    status, _, err = cli("import", "--from-db", str(tmp_path / "nope.db"))
    assert status == 1 and "no such file" in err
    status, _, err = cli("merge", "a", "a")
    assert status == 1 and "target_agent_id" in err
    status, _, err = cli("restore", str(tmp_path))
    assert status == 1 and "not a cpersona backup folder" in err


def test_backup_and_restore_bring_the_side_files_back(cli, tmp_path):
    assert cli("import", str(FIXTURES / "original-2.5.4" / "export-kai.jsonl"))[0] == 0 if FIXTURES.exists() else \
        pytest.skip("../shared/fixtures is absent")
    sidecar = Path(str(cli.db) + ".calibration.json")
    sidecar.write_text('{"format": 1, "agent_betas": {"kai": 2.0}}')
    context = tmp_path / "ctx.toml"
    context.write_text('version = 1\n[registry]\nproject_ids = ["", "ops"]\n')
    status, out, _ = cli("backup", str(tmp_path / "bk"))
    assert status == 0 and "backed up 5 memories" in out and "calibration" in out and "operating_context" in out
    manifest = json.loads((tmp_path / "bk" / "manifest.json").read_text())
    assert {f["role"] for f in manifest["files"]} == {"database", "calibration", "operating_context"}
    assert manifest["rows"] == {"memories": 5, "episodes": 1, "profiles": 1} and manifest["schema_version"] == 13
    assert cli("backup", str(tmp_path / "bk"))[0] == 1  # never over an existing folder
    assert cli("merge", "kai", "other", "--move")[0] == 0
    sidecar.write_text("{}")
    context.unlink()
    status, out, _ = cli("restore", str(tmp_path / "bk"))
    assert status == 0 and "restored database, calibration, operating_context" in out
    assert db_rows(cli.db, "SELECT agent_id, COUNT(*) FROM memories GROUP BY 1") == [("kai", 5)]
    assert json.loads(sidecar.read_text())["agent_betas"] == {"kai": 2.0} and context.exists()
    kept = next(tmp_path.glob("cpersona-replaced-*"))
    assert db_rows(kept / "cli.db", "SELECT agent_id, COUNT(*) FROM memories GROUP BY 1") == [("other", 5)]
    assert (kept / sidecar.name).read_text() == "{}"


def test_a_damaged_backup_restores_nothing(cli, tmp_path):
    assert cli("store", "one memory", "--agent", "a")[0] == 0
    assert cli("backup", str(tmp_path / "bk"))[0] == 0
    assert cli("store", "a second memory", "--agent", "a")[0] == 0
    db_copy = tmp_path / "bk" / "memory.db"
    data = bytearray(db_copy.read_bytes())
    data[5000] ^= 0xFF
    db_copy.write_bytes(bytes(data))
    status, _, err = cli("restore", str(tmp_path / "bk"))
    assert status == 1 and "does not match the manifest" in err and "nothing was restored" in err
    assert db_rows(cli.db, "SELECT COUNT(*) FROM memories") == [(2,)]
    assert not list(tmp_path.glob("cpersona-replaced-*"))


def test_an_unusable_database_exits_2(tmp_path):
    db = tmp_path / "notes.db"
    db.write_bytes(b"not a database at all" * 100)
    proc = subprocess.run([sys.executable, "-m", "cpersona", "export", str(tmp_path / "x.jsonl")],
                          env=clean_env(CPERSONA_DB_PATH=str(db), CPERSONA_EMBEDDING_MODE="none"),
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert_one_line_error(proc, "not a database")


#: `cpersona ARGS` with a soft file-size limit of LIMIT bytes on every file it writes (SIGXFSZ is
#: ignored by Python, so a write past it fails as "File too large" / SQLITE_FULL, as on a full disk).
LIMIT = 200_000
LIMITED = [sys.executable, "-c", "import resource, runpy, sys; "
           f"resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT}, resource.getrlimit(resource.RLIMIT_FSIZE)[1])); "
           "sys.argv = ['cpersona', *sys.argv[1:]]; runpy.run_module('cpersona', run_name='__main__')"]


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="needs POSIX resource limits")
@pytest.mark.parametrize("command", ["backup", "export"])
def test_a_disk_that_cannot_take_the_copy_is_one_line_and_leaves_nothing(tmp_path, command):
    db = tmp_path / "big.db"
    eng = new_engine(db)
    for i in range(60):
        eng.store("a", f"fact {i} " + os.urandom(4000).hex())
    eng.close()
    dest = tmp_path / "out" / ("bk" if command == "backup" else "a.jsonl")
    dest.parent.mkdir()
    proc = subprocess.run([*LIMITED, command, str(dest)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=clean_env(CPERSONA_DB_PATH=str(db), CPERSONA_EMBEDDING_MODE="none"))
    assert_one_line_error(proc, "cannot copy" if command == "backup" else "File too large")
    assert list(dest.parent.iterdir()) == []  # no partial backup folder, no temporary export file
    assert db_rows(db, "SELECT COUNT(*) FROM memories") == [(60,)]
