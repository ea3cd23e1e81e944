"""Counts and row lists for the health checks on PostgreSQL: `storage/inventory.py` with its
portable statements reused (postgres/dialect.py); dates parsed by `cpersona_julianday` (the
forms SQLite's julianday accepts), JSON validity by `cpersona_json_valid`."""

from __future__ import annotations

import psycopg

from cpersona.storage.inventory import InventoryRepo
from cpersona.storage.postgres.dialect import qmark


class PgInventoryRepo(InventoryRepo):
    """Counts and row lists for the checks, over one connection."""

    NOW = "cpersona_now()"

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(qmark(conn))
        self.pg = conn

    def vector_counts(self, table: str, agent: str) -> tuple[int, int, int]:
        """(rows, rows without a vector, locked rows without one) of the agent's rows."""
        where, params = self._agent(agent)
        locked = "COALESCE(sum(CASE WHEN embedding IS NULL AND locked = 1 THEN 1 ELSE 0 END), 0)" \
            if table == "memories" else "0"
        row = self.conn.execute(f"SELECT count(*), COALESCE(sum(CASE WHEN embedding IS NULL THEN 1 ELSE 0 END), 0), "
                                f"{locked} FROM {table} WHERE {where}", params).fetchone()
        return int(row[0]), int(row[1]), int(row[2])

    def _queue_status_known(self) -> bool:
        return True

    def old_tasks(self, agent: str, seconds: int) -> list[tuple[int, str, str]]:
        """(id, type, payload) of queue rows created more than `seconds` ago."""
        where, params = self._agent(agent)
        sql = ("SELECT id, task_type, payload FROM pending_memory_tasks WHERE created_at <= to_char("
               "(clock_timestamp() AT TIME ZONE 'UTC') - make_interval(secs => ?), 'YYYY-MM-DD HH24:MI:SS') "
               f"AND {where} ORDER BY id")
        return [tuple(r) for r in self.conn.execute(sql, [int(seconds), *params])]

    def user_sentinel_rows(self, agent: str) -> list[tuple[int, str, str, int]]:
        """(id, content, source, locked) of memories whose source is the empty User sentinel."""
        sql = ("SELECT id, content, source, locked FROM memories WHERE agent_id = %s AND cpersona_json_valid(source) "
               "AND jsonb_typeof(source::jsonb) = 'object' AND source::jsonb ->> 'type' = 'User' "
               "AND source::jsonb ->> 'id' = '' AND source::jsonb ->> 'name' = '' ORDER BY id")
        return [tuple(r) for r in self.pg.execute(sql, (agent,))]

    def memory_days(self, agent: str) -> list[float]:
        sql = ("SELECT d FROM (SELECT cpersona_julianday(timestamp) AS d FROM memories WHERE agent_id = %s) AS x "
               "WHERE d IS NOT NULL ORDER BY d")
        return [r[0] for r in self.pg.execute(sql, (agent,))]

    def episode_spans(self, agent: str) -> list[tuple[int, str, str, str, float, float, float | None]]:
        sql = ("SELECT * FROM (SELECT id, summary, start_time, end_time, cpersona_julianday(start_time) AS s, "
               "cpersona_julianday(end_time) AS e, cpersona_julianday(created_at) AS c FROM episodes "
               "WHERE agent_id = %s) AS x "
               "WHERE s IS NOT NULL AND e IS NOT NULL ORDER BY id")
        return [tuple(r) for r in self.pg.execute(sql, (agent,))]
