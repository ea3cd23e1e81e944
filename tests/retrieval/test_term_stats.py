"""Common-term pruning of FTS queries (cpersona.retrieval.term_stats) and the gate pool cache."""

from __future__ import annotations

from cpersona.retrieval import term_stats
from cpersona.storage.db import Database


def fill(db: Database, n: int) -> None:
    with db.write() as session:
        conn = session.conn
        conn.executemany(
            "INSERT INTO memories(agent_id, content, timestamp) VALUES ('a', ?, '')",
            [(f"common boilerplate line {i} unique-{i:05d}" + (" rareword" if i == 7 else ""),) for i in range(n)],
        )


def test_common_terms_are_dropped_on_large_tables(tmp_path):
    db = Database(str(tmp_path / "t.db"))
    fill(db, 20500)
    with db.read() as session:
        kept = term_stats.prune_common(session, "memories_fts", ["boilerplate", "rareword", "unique-00042"])
    assert kept == ["rareword", "unique-00042"]
    db.close()


def test_rarest_term_survives_and_small_tables_are_untouched(tmp_path):
    db = Database(str(tmp_path / "t.db"))
    fill(db, 20500)
    with db.read() as session:
        assert term_stats.prune_common(session, "memories_fts", ["common", "boilerplate"]) in (["common"], ["boilerplate"])
    db.close()
    small = Database(str(tmp_path / "s.db"))
    fill(small, 100)
    with small.read() as session:
        assert term_stats.prune_common(session, "memories_fts", ["common", "boilerplate"]) == ["common", "boilerplate"]
    small.close()


def test_other_agents_data_cannot_hide_a_row_through_pruning(tmp_path):
    from cpersona.config import Settings
    from cpersona.service.engine import Engine
    from cpersona.service.requests import RecallRequest

    eng = Engine(Settings.from_env({}, db_path=str(tmp_path / "x.db"), embedding_mode="none"))
    eng.store("a", "the kubernetes server crashed at noon")
    with eng.db.write() as session:
        conn = session.conn
        conn.executemany("INSERT INTO memories(agent_id, content, timestamp) VALUES ('b', ?, '')",
                         [(f"kubernetes note {i}",) for i in range(21000)])
    got = [m["content"] for m in eng.recall(RecallRequest("a", "kubernetes server"))["messages"]]
    assert got == ["the kubernetes server crashed at noon"]
    eng.close()


def test_gate_pool_count_is_cached_until_the_file_changes(tmp_path):
    from cpersona.config import Settings
    from cpersona.service.engine import Engine
    from cpersona.storage.scope import Scope

    eng = Engine(Settings.from_env({}, db_path=str(tmp_path / "p.db"), embedding_mode="none"))
    other = Engine(Settings.from_env({}, db_path=str(tmp_path / "p.db"), embedding_mode="none"))
    scope = Scope("a", None, None)
    assert eng.pool_size(scope) == 0
    eng.store("a", "one")
    assert eng.pool_size(scope) == 1  # own write
    other.archive_episode("a", "an episode")
    assert eng.pool_size(scope) == 2  # another connection's commit
    eng.close()
    other.close()


def test_recall_counts_the_gate_pool_once_until_the_file_changes(tmp_path, monkeypatch):
    from cpersona.config import Settings
    from cpersona.service.engine import Engine
    from cpersona.service.requests import RecallRequest
    from cpersona.storage.search import SearchRepo

    counted = []
    real = SearchRepo.pool_size
    monkeypatch.setattr(SearchRepo, "pool_size", lambda self, scope: counted.append(scope) or real(self, scope))
    # no background threads: a write of theirs in flight makes a recall count without the cache (by design)
    eng = Engine(Settings.from_env({}, db_path=str(tmp_path / "c.db"), embedding_mode="none"), start_background=False)
    try:
        eng.store("a", "kiwi orchard notes")
        for _ in range(3):
            assert eng.recall(RecallRequest("a", "kiwi"))["messages"]
        assert len(counted) == 1
        eng.store("a", "kiwi harvest")
        eng.recall(RecallRequest("a", "kiwi"))
        assert len(counted) == 2  # a write invalidates the cached count
    finally:
        eng.close()


def test_idf_stays_defined_when_rows_arrive_between_its_two_reads():
    """N (the table size) and n (rows holding a term) are separate statements: a writer on
    another node can commit rows in between, so n may exceed the N read first. The idf is
    then the smallest one (a term in every row), never a math domain error."""

    class Search:
        def table_size(self, fts: str) -> int:
            return 10  # read first

        def term_doc_counts(self, fts: str, terms: list[str]) -> dict[str, int]:
            return {"deploy": 14, "rare": 1}  # read after 5 more rows holding "deploy" arrived

    class Session:
        search = Search()

    weights, counts = term_stats.idf(Session(), "memories_words", ["deploy", "rare"])  # type: ignore[arg-type]
    assert counts == {"deploy": 14, "rare": 1}
    assert weights["deploy"] == 1e-6 and weights["rare"] > 1.0


def test_cached_word_counts_follow_every_change_of_the_index(tmp_path):
    """Term counts are cached per connection while the file is unchanged: a store, an
    update, a delete (by this process or another connection) shows in the next idf."""
    import sqlite3

    from cpersona.config import Settings
    from cpersona.service.engine import Engine

    eng = Engine(Settings.from_env({}, db_path=str(tmp_path / "x.db"), embedding_mode="none"))
    try:
        def rows_holding(term: str) -> int:
            with eng.db.read() as session:
                return term_stats.idf(session, "memories_words", [term])[1][term]

        first = eng.store("a", "the deploy failed twice")["id"]
        eng.store("a", "lunch at noon")
        assert rows_holding("deploy") == 1 and rows_holding("deploy") == 1  # second answer from the cache
        eng.store("a", "another deploy today")
        assert rows_holding("deploy") == 2
        other = sqlite3.connect(tmp_path / "x.db")  # another process's connection
        other.execute("UPDATE memories SET content = 'no such word' WHERE id = ?", (first,))
        other.commit()
        assert rows_holding("deploy") == 1
        other.execute("DELETE FROM memories WHERE content = 'another deploy today'")
        other.commit()
        other.close()
        assert rows_holding("deploy") == 0
    finally:
        eng.close()
