"""`SearchRepo`'s scoped MATCH (storage/search.py): the rows of the scope among the best
matches of the whole table are looked up in two steps (the best `limit` first, the rest only
when some of those belong to another scope); the answer is always the scoped ranking's own
rows, order and scores."""

from __future__ import annotations

import random

import pytest
from cpersona.config import Settings
from cpersona.storage import word_index
from cpersona.storage.backend import open_database
from cpersona.storage.scope import Scope
from cpersona.util.text import match_expression

WORDS = ["deploy", "failed", "staging", "port", "lunch", "audit", "friday", "team", "database", "noon"]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """One file, three agents whose rows interleave in every ranking (agent `a` holds a fifth)."""
    rng = random.Random(3)
    path = tmp_path_factory.mktemp("scope") / "x.db"
    database, _damage = open_database(Settings.from_env({}, db_path=str(path), embedding_mode="none"))
    with database.write() as s:
        for i in range(600):
            agent = "a" if i % 5 == 0 else rng.choice("bc")
            words = rng.sample(WORDS, rng.randint(1, 5)) + ["pad"] * rng.randint(0, 3)
            text = f"{' '.join(words)} row {i}"
            row_id = s.conn.execute("INSERT INTO memories(agent_id, content, timestamp) VALUES (?, ?, '2026-01-01')",
                                    (agent, text)).lastrowid
            word_index.put(s.conn, row_id, text)
    yield database
    database.close()


@pytest.mark.parametrize("fts", ["memories_fts", "memories_words"])
@pytest.mark.parametrize("terms", [["deploy", "failed"], ["staging", "port", "database"], ["lunch"],
                                   ["team", "friday", "audit", "noon"]])
@pytest.mark.parametrize("agent", ["a", "b"])
@pytest.mark.parametrize("limit", [1, 3, 10, 40])
def test_scoped_answer_is_the_scoped_ranking(db, fts, terms, agent, limit):
    expr = match_expression(terms)
    with db.read() as s:
        got = s.search.memories_fts(expr, Scope(agent), "", limit) if fts == "memories_fts" else \
            s.search.memories_words(expr, Scope(agent), "", limit)
        want = s.conn.execute(
            f"SELECT m.id, {fts}.rank FROM {fts} JOIN memories m ON m.id = {fts}.rowid "
            f"WHERE {fts} MATCH ? AND m.agent_id = ? ORDER BY {fts}.rank, m.id LIMIT ?", (expr, agent, limit)).fetchall()
    assert want  # the query matches rows of this agent
    assert [(row.id, score) for row, score in got] == want
