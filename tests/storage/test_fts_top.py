"""`storage/fts_top.py`: every answer it gives is a prefix of FTS5's own ranking
(`ORDER BY rank`, equal bm25 by ascending rowid) with FTS5's own scores, whether the
common phrases were pruned or not."""

from __future__ import annotations

import random
import sqlite3

import pytest
from cpersona.storage import fts_top
from cpersona.util.text import match_expression

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "kiwi", "mango", "rare1", "rare2", "zeta"]
#: word → share of rows holding it: a few very common words, a few rare ones
SHARE = {"alpha": 0.6, "beta": 0.5, "gamma": 0.3, "delta": 0.2, "omega": 0.1, "kiwi": 0.05, "mango": 0.02,
         "rare1": 0.004, "rare2": 0.002, "zeta": 0.01}


@pytest.fixture(scope="module", params=["unicode61", "trigram"])
def conn(request):
    rng = random.Random(7)
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE f USING fts5(body, tokenize='{request.param}')")
    rows = []
    for i in range(1, 6001):
        words = [w for w in WORDS if rng.random() < SHARE[w]] or ["filler"]
        words += ["pad"] * rng.choice([0, 0, 1, 3])  # equal texts and lengths: many equal scores
        rows.append((i, " ".join(words)))
    db.executemany("INSERT INTO f(rowid, body) VALUES (?, ?)", rows)
    yield db
    db.close()


def full(db, expr: str) -> list[tuple[int, float]]:
    return db.execute("SELECT rowid, rank FROM f WHERE f MATCH ? ORDER BY rank", (expr,)).fetchall()


QUERIES = [["alpha", "beta", "rare1"], ["alpha", "beta", "gamma", "rare2", "mango"], ["alpha", "kiwi"],
           ["beta", "gamma", "delta", "omega"], ["rare1", "rare2"], ["alpha"], ["alpha", "beta", "zeta", "pad"]]


@pytest.mark.parametrize("terms", QUERIES)
@pytest.mark.parametrize("depth", [1, 5, 40, 400])
def test_every_answer_is_a_prefix_of_fts5s_ranking(conn, monkeypatch, terms, depth):
    monkeypatch.setattr(fts_top, "MIN_ROWS", 1000)  # prune on this small table
    monkeypatch.setattr(fts_top, "MIN_SAVED_ROWS", 100)
    expr = match_expression(terms)
    want = full(conn, expr)
    answers = list(fts_top.prefixes(conn, "f", expr, depth))
    for got, complete in answers:
        assert got == want[: len(got)]
        assert len(got) <= depth
        assert complete == (len(got) == len(want))
    last, _ = answers[-1]
    assert last == want[:depth]  # the unpruned answer always comes last


def test_pruning_happens_and_scores_fewer_rows(conn, monkeypatch):
    monkeypatch.setattr(fts_top, "MIN_ROWS", 1000)
    monkeypatch.setattr(fts_top, "MIN_SAVED_ROWS", 100)
    expr = match_expression(["alpha", "beta", "rare1"])
    first, complete = next(fts_top.prefixes(conn, "f", expr, 10))
    assert len(first) == 10 and not complete  # proven from the rows holding rare1 alone
    assert first == full(conn, expr)[:10]


def test_only_plain_or_lists_of_distinct_phrases_are_pruned():
    assert fts_top.or_phrases('"a" OR "b ""c"""') == ["a", 'b ""c""']
    assert fts_top.or_phrases('"a" AND "b"') is None
    assert fts_top.or_phrases("a OR b") is None


def test_kept_phrase_counts_follow_another_connections_commit(tmp_path, monkeypatch):
    """The phrase counts behind the pruning are kept by the connection (storage/fts_counts.py)
    only while the file is unchanged: after another connection makes a rare phrase common
    (and the common one rare), the pruned answer is still a prefix of FTS5's ranking."""
    from cpersona.storage.fts_counts import CountingConnection

    monkeypatch.setattr(fts_top, "MIN_ROWS", 1000)
    monkeypatch.setattr(fts_top, "MIN_SAVED_ROWS", 100)
    path = tmp_path / "f.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("CREATE VIRTUAL TABLE f USING fts5(body)")
    writer.executemany("INSERT INTO f(rowid, body) VALUES (?, ?)",
                       [(i, "alpha pad" if i % 50 else "alpha rare1") for i in range(1, 3001)])
    reader = sqlite3.connect(path, isolation_level=None, factory=CountingConnection)
    expr = match_expression(["alpha", "rare1"])
    first, _ = next(fts_top.prefixes(reader, "f", expr, 10))
    assert first and first == full(reader, expr)[: len(first)]
    assert reader.kept_counts  # the counts were kept
    writer.execute("DELETE FROM f WHERE body = 'alpha pad'")  # alpha is now as rare as rare1…
    writer.executemany("INSERT INTO f(rowid, body) VALUES (?, ?)", [(i, "rare1 pad") for i in range(5001, 8001)])
    for got, _ in fts_top.prefixes(reader, "f", expr, 10):  # …and rare1 the common one
        assert got == full(reader, expr)[: len(got)]
    assert reader.kept_counts[("phrase", "f", "rare1")] == 3060
    reader.close()
    writer.close()
