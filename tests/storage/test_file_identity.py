"""The database file deleted or replaced under a running server: SQLite keeps writing into
the unlinked file (https://www.sqlite.org/howtocorrupt.html §2.4), so every write acknowledged
after that would vanish with the process. The server refuses instead — naming the condition —
never creates an empty file at the path as a side effect of a read, and serves again as soon
as the original file is back."""

from __future__ import annotations

import logging
import os
import shutil

import pytest
from cpersona.errors import StorageUnavailable
from cpersona.service.requests import RecallRequest

from conftest import db_counts, in_thread, new_engine

SIDES = ("", "-wal", "-shm")


def _move_away(path, to):
    for side in SIDES:
        if os.path.exists(f"{path}{side}"):
            os.replace(f"{path}{side}", f"{to}{side}")


def _recall(eng, agent="kai"):
    return [m["content"] for m in eng.recall(RecallRequest(agent_id=agent, query="fact"))["messages"]]


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_write_to_a_deleted_or_replaced_file_is_refused_not_acknowledged(tmp_path, caplog, how):
    caplog.set_level(logging.INFO)
    path = tmp_path / "m.db"
    eng = new_engine(path)
    try:
        assert eng.store("kai", "first fact")["result"] == "stored"
        _move_away(path, tmp_path / "away.db")
        if how == "replaced":
            shutil.copyfile(tmp_path / "away.db", path)
        for _ in range(3):
            with pytest.raises(StorageUnavailable) as raised:
                eng.store("kai", "second fact, after the file went away")
            assert raised.value.kind == "file_gone" and str(path) in str(raised.value)
            assert raised.value.retry_after_ms is None
        with pytest.raises(StorageUnavailable, match="deleted or replaced"):
            eng.update_profile("kai", "a profile")
        refused = in_thread(lambda: _recall(eng))
        assert isinstance(refused, StorageUnavailable) and refused.kind == "file_gone"
        assert os.path.exists(path) is (how == "replaced")  # a read did not create an empty file
        if how == "replaced":
            os.remove(path)
        _move_away(tmp_path / "away.db", path)  # the file is back: the server heals by itself
        assert eng.store("kai", "third fact, the file is back")["result"] == "stored"
        assert in_thread(lambda: sorted(_recall(eng))) == ["first fact", "third fact, the file is back"]
    finally:
        eng.close()
    gone = [r for r in caplog.records if "deleted or replaced" in r.getMessage()]
    assert len(gone) == 1 and gone[0].levelno == logging.WARNING and not gone[0].exc_info
    assert db_counts(path)["memories"] == 2
