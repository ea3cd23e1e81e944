"""PostgreSQL helpers of the benchmarks: a fresh schema per run (so a run starts from an
empty store and leaves nothing behind), the counts the SQLite runs read from the file, and
the cross-node visibility delay (a store on node A until node B's recall finds it by vector).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def is_url(db: object) -> bool:
    return isinstance(db, str) and db.startswith(("postgresql://", "postgres://"))


@contextmanager
def fresh_schema(url: str, label: str = "bench") -> Iterator[str]:
    """A new schema on the server of `url`; yields a URL using it; dropped afterwards."""
    from cpersona.storage.postgres.schemas import fresh_schema as create

    with create(url, label) as schema_url:
        yield schema_url


def count_unembedded(url: str) -> tuple[int, int]:
    """(memories without a vector, all memories) of the store at `url`."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FILTER (WHERE embedding IS NULL), count(*) FROM memories").fetchone()
    return (row[0], row[1]) if row else (0, 0)


def size_mb(url: str) -> float:
    """Tables + indexes + TOAST of the store's schema, in MiB."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::float8 FROM pg_class c "
                           "JOIN pg_namespace n ON n.oid = c.relnamespace "
                           "WHERE n.nspname = current_schema() AND c.relkind = 'r'").fetchone()
    return round((row[0] if row else 0) / 2**20, 2)


def store_size_mb(db: Path | str) -> float | None:
    """Size of the store, whichever backend holds it."""
    if is_url(db):
        return size_mb(str(db))
    path = Path(db)
    return round(path.stat().st_size / 2**20, 2) if path.exists() else None


def visibility_delays(url: str, embedding_url: str, n: int = 30,
                      timeout_s: float = 10.0) -> tuple[list[float], list[float]]:
    """For `n` stores acknowledged on node A: (ms until node B's change feed has the row —
    its data version moves —, ms until node B's recall ranks the row first with the vector
    retriever, that recall included). Two Engines in this process, each with its own pool
    and change feed, on one database."""
    from cpersona.config import Settings
    from cpersona.service.engine import Engine
    from cpersona.service.requests import RecallRequest

    settings = Settings.from_env({}, db_url=url, embedding_mode="http", embedding_url=embedding_url,
                                 task_queue_enabled=False, gate_enabled=False)
    node_a, node_b = Engine(settings), Engine(settings)
    delays, feed = [], []
    try:
        node_a.store("visibility", "warm-up memory for the visibility probe")
        node_b.recall(RecallRequest(agent_id="visibility", query="warm-up"))
        for i in range(n):
            text = f"visibility probe {i}: {uuid.uuid4().hex} lighthouse {i * 7919}"
            version = node_b.db.data_version()
            ref = f"mem:{node_a.store('visibility', text)['id']}"
            started = time.perf_counter()
            while node_b.db.data_version() == version and time.perf_counter() - started < timeout_s:
                time.sleep(0.0002)
            feed.append((time.perf_counter() - started) * 1000)
            while time.perf_counter() - started < timeout_s:
                best = node_b.recall(RecallRequest(agent_id="visibility", query=text, limit=1))["messages"]
                if best and best[-1]["ref"] == ref and "vector" in best[-1]["match_reason"]["retrievers"]:
                    break
                time.sleep(0.0005)
            delays.append((time.perf_counter() - started) * 1000)
    finally:
        node_a.close()
        node_b.close()
    return feed, delays
