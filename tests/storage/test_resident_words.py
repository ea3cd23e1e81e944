"""`storage/resident_words.py`: the word postings in memory answer exactly as FTS5 does (the
same rows, order and bm25 doubles), only at the file's current state, and step aside
(None: ask FTS5) for anything they do not hold."""

from __future__ import annotations

import logging
import sqlite3

import pytest
from cpersona.retrieval.pipeline import RecallRequest
from cpersona.storage import resident_words as rw
from cpersona.util.text import match_expression
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import wait_until
from quality_helpers import make

#: Plain tokens of several scripts, a few very common; "zzz" and "無い" are in no row.
VOCAB = ["alpha", "beta", "gamma", "deploy", "k8s", "2024", "日本", "東京", "カタカナー", "ひらがな", "서울", "x"]
QUERY_VOCAB = [*VOCAB, "zzz", "無い"]


def fts_table(rows: list[tuple[int, str]], deleted: list[int]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute(f"CREATE VIRTUAL TABLE {rw.TABLE} USING fts5(body, tokenize='unicode61 remove_diacritics 0')")
    conn.execute(f"CREATE VIRTUAL TABLE {rw.INSTANCES} USING fts5vocab(main, {rw.TABLE}, 'instance')")
    conn.executemany(f"INSERT INTO {rw.TABLE}(rowid, body) VALUES (?, ?)", rows)
    conn.executemany(f"DELETE FROM {rw.TABLE} WHERE rowid = ?", [(i,) for i in deleted])
    return conn


def fts5(conn: sqlite3.Connection, phrases: list[str], depth: int) -> list[tuple[int, float]]:
    expr = " OR ".join(f'"{p}"' for p in phrases)
    return [tuple(r) for r in conn.execute(
        f"SELECT rowid, rank FROM {rw.TABLE} WHERE {rw.TABLE} MATCH ? ORDER BY +rank, rowid LIMIT ?", (expr, depth))]


@settings(max_examples=60, deadline=None)
@given(bodies=st.lists(st.lists(st.sampled_from(VOCAB), max_size=12), min_size=1, max_size=60),
       deleted=st.sets(st.integers(1, 60), max_size=10),
       phrases=st.lists(st.sampled_from(QUERY_VOCAB), min_size=1, max_size=6),
       depth=st.sampled_from([1, 3, 10, 40, 100]))
def test_the_postings_rank_exactly_as_fts5(bodies, deleted, phrases, depth):
    rows = [(i * 3 + 1, " ".join(words)) for i, words in enumerate(bodies)]  # gaps in the rowids
    conn = fts_table(rows, [i * 3 + 1 for i in deleted])
    snap = rw.build(conn, (0, 0))
    want = fts5(conn, phrases, depth)
    if snap is None:  # every row deleted
        assert want == []
        return
    assert snap.top(phrases, depth) == want  # the same doubles, not merely close ones
    assert rw.agrees(conn, snap)


@pytest.mark.parametrize("text, plain", [
    ("deploy", True), ("k8s", True), ("2024", True), ("日本", True), ("カタカナー", True), ("서울", True),
    ("Deploy", False), ("café", False), ("a-b", False), ("a_b", False), ("", False), ("ß", False), ("а", False)])
def test_only_a_text_fts5_reads_as_itself_is_plain(text, plain):
    assert rw.plain_token(text) is plain


def test_a_build_that_disagrees_with_fts5_turns_the_postings_off(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(rw, "QUIET_S", 0.01)
    monkeypatch.setattr(rw, "agrees", lambda conn, snap: False)
    eng = make(tmp_path / "off.db", embedder=None)
    try:
        eng.store("a", "deploy the billing service")
        resident = eng.db.resident_words
        with caplog.at_level(logging.WARNING, logger=rw.__name__):
            assert resident.top(match_expression(["deploy"]), 10) is None  # not built yet: FTS5 answers
            assert wait_until(lambda: resident.top(match_expression(["deploy"]), 10) is None and resident.disabled)
        assert resident.top(match_expression(["deploy"]), 10) is None
        assert "ranked differently from FTS5" in caplog.text
        assert eng.recall(RecallRequest("a", "deploy"))["messages"]  # FTS5 still answers
    finally:
        eng.close()


def test_recall_uses_the_postings_only_at_the_files_current_state(tmp_path, monkeypatch):
    monkeypatch.setattr(rw, "QUIET_S", 0.01)
    eng = make(tmp_path / "fresh.db", embedder=None)
    try:
        first = eng.store("a", "we deploy the billing service on fridays")["id"]
        resident = eng.db.resident_words
        expr = match_expression(["deploy", "billing"])
        assert wait_until(lambda: resident.top(expr, 10) is not None)  # asking starts the build
        with eng.db.read() as s:
            fts_answer = [(r.id, score) for r, score in s.search.memories_words(expr, _scope("a"), "", 10)]
        assert fts_answer and fts_answer[0][0] == first
        second = eng.store("a", "billing deploy billing deploy runbook")["id"]
        assert resident.top(expr, 10) is None  # the file changed: FTS5 answers until the rebuild
        ids = [m["ref"] for m in eng.recall(RecallRequest("a", "deploy billing"))["messages"]]
        assert f"mem:{second}" in ids
        assert wait_until(lambda: (resident.top(expr, 10) or [(0, 0)])[0][0] == second)
    finally:
        eng.close()
    assert resident._thread is not None and not resident._thread.is_alive()  # closing ends the builder


def _scope(agent: str):
    from cpersona.storage.scope import Scope
    return Scope(agent)
