"""Common-term pruning of FTS queries (cpersona.core.retrieval.term_stats)."""

from __future__ import annotations

from cpersona.core.db import Database
from cpersona.core.retrieval import term_stats


def fill(db: Database, n: int) -> None:
    with db.write() as conn:
        conn.executemany(
            "INSERT INTO memories(agent_id, content, timestamp) VALUES ('a', ?, '')",
            [(f"common boilerplate line {i} unique-{i:05d}" + (" rareword" if i == 7 else ""),) for i in range(n)],
        )


def test_common_terms_are_dropped_on_large_tables(tmp_path):
    db = Database(str(tmp_path / "t.db"))
    fill(db, 20500)
    with db.read() as conn:
        kept = term_stats.prune_common(conn, "memories_fts", "memories", ["boilerplate", "rareword", "unique-00042"])
    assert kept == ["rareword", "unique-00042"]
    db.close()


def test_rarest_term_survives_and_small_tables_are_untouched(tmp_path):
    db = Database(str(tmp_path / "t.db"))
    fill(db, 20500)
    with db.read() as conn:
        assert term_stats.prune_common(conn, "memories_fts", "memories", ["common", "boilerplate"]) in (["common"], ["boilerplate"])
    db.close()
    small = Database(str(tmp_path / "s.db"))
    fill(small, 100)
    with small.read() as conn:
        assert term_stats.prune_common(conn, "memories_fts", "memories", ["common", "boilerplate"]) == ["common", "boilerplate"]
    small.close()


def test_other_agents_data_cannot_hide_a_row_through_pruning(tmp_path):
    from cpersona.core.config import Settings
    from cpersona.core.engine import Engine
    from cpersona.core.retrieval.pipeline import RecallRequest

    eng = Engine(Settings.from_env({}, db_path=str(tmp_path / "x.db"), embedding_mode="none"))
    eng.store("a", "the kubernetes server crashed at noon")
    with eng.db.write() as conn:
        conn.executemany("INSERT INTO memories(agent_id, content, timestamp) VALUES ('b', ?, '')",
                         [(f"kubernetes note {i}",) for i in range(21000)])
    got = [m["content"] for m in eng.recall(RecallRequest("a", "kubernetes outage"))["messages"]]
    assert got == ["the kubernetes server crashed at noon"]
    eng.close()


def test_gate_pool_count_is_cached_until_the_file_changes(tmp_path):
    from cpersona.core.config import Settings
    from cpersona.core.engine import Engine
    from cpersona.core.isolation import Scope

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
    import pytest

    import cpersona.core.engine as engine_module
    from cpersona.core.config import Settings
    from cpersona.core.engine import Engine
    from cpersona.core.retrieval import gate
    from cpersona.core.retrieval.pipeline import RecallRequest

    counted = []
    real = engine_module.gate_pool_size
    monkeypatch.setattr(engine_module, "gate_pool_size", lambda conn, scope: counted.append(scope) or real(conn, scope))
    monkeypatch.setattr(gate, "pool_size", lambda *a: pytest.fail("recall bypassed the engine's pool cache"))
    eng = Engine(Settings.from_env({}, db_path=str(tmp_path / "c.db"), embedding_mode="none"))
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
