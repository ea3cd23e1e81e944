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
    fill(db, 2500)
    with db.read() as conn:
        kept = term_stats.prune_common(conn, "memories_fts", "memories", ["boilerplate", "rareword", "unique-00042"])
    assert kept == ["rareword", "unique-00042"]
    db.close()


def test_rarest_term_survives_and_small_tables_are_untouched(tmp_path):
    db = Database(str(tmp_path / "t.db"))
    fill(db, 2500)
    with db.read() as conn:
        assert term_stats.prune_common(conn, "memories_fts", "memories", ["common", "boilerplate"]) in (["common"], ["boilerplate"])
    db.close()
    small = Database(str(tmp_path / "s.db"))
    fill(small, 100)
    with small.read() as conn:
        assert term_stats.prune_common(conn, "memories_fts", "memories", ["common", "boilerplate"]) == ["common", "boilerplate"]
    small.close()
