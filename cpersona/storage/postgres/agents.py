"""Per-agent queries on PostgreSQL: `storage/agents.py` with its portable statements reused
(postgres/dialect.py) and the erasure by id (PostgreSQL tables have no rowid)."""

from __future__ import annotations

import psycopg

from cpersona.storage.agents import AgentRepo
from cpersona.storage.postgres.dialect import qmark


class PgAgentRepo(AgentRepo):
    """Per-agent queries over one connection."""

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(qmark(conn))
        self.pg = conn

    def _delete(self, table: str, agent_id: str, limit: int) -> int:
        return self.pg.execute(f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE agent_id = %s "
                               "LIMIT %s)", (agent_id, limit)).rowcount
