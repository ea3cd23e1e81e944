"""The declared graph on PostgreSQL: the tables of `storage/schema.py`'s ASSOCIATION_TABLES
(ids BIGSERIAL, record and entity ids BIGINT — the same columns and keys), their indexes, the
delete triggers as statement triggers over transition tables (one call per DELETE statement,
however many rows it removes), and `storage/associations.py`'s repository with the
statements PostgreSQL spells differently: the inserts (`ON CONFLICT DO NOTHING`, `RETURNING`)
and the mentions' join to their records (a malformed ref joins nothing instead of failing
the cast)."""

from __future__ import annotations

import psycopg

from cpersona.storage.associations import AssociationRepo
from cpersona.storage.postgres.dialect import qmark
from cpersona.storage.postgres.rows import scalar
from cpersona.storage.postgres.scope import row_filter
from cpersona.storage.records import EntityDraft
from cpersona.storage.schema import ASSOCIATION_INDEXES, ASSOCIATION_TABLES
from cpersona.storage.scope import Scope


def _pg(ddl: str) -> str:
    return ddl.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY").replace("INTEGER", "BIGINT")


def _record_trigger(kind: str, table: str) -> dict[str, str]:
    """Deleting memories (episodes) takes their mentions and the relations naming them."""
    fn = f"cpersona_graph_{table}_delete"
    gone = f"(SELECT '{kind}:' || id FROM old_rows)"
    ids = "(SELECT id FROM old_rows)"
    return {
        fn: f"""CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              DELETE FROM entity_mentions WHERE ref IN {gone};
              DELETE FROM relations WHERE (subject_kind = '{kind}' AND subject_id IN {ids})
                                       OR (object_kind = '{kind}' AND object_id IN {ids})
                                       OR anchor_ref IN {gone};
              RETURN NULL;
            END $$""",
        f"drop {fn}": f"DROP TRIGGER IF EXISTS {fn} ON {table}",
        f"trigger {fn}": f"CREATE TRIGGER {fn} AFTER DELETE ON {table} REFERENCING OLD TABLE AS old_rows "
                         f"FOR EACH STATEMENT EXECUTE FUNCTION {fn}()",
    }


#: Tables, indexes and delete triggers, in creation order (every statement idempotent).
DDL = {
    **{name: _pg(ddl) for name, ddl in ASSOCIATION_TABLES.items()},
    **ASSOCIATION_INDEXES,
    "cpersona_graph_entities_delete": """CREATE OR REPLACE FUNCTION cpersona_graph_entities_delete()
        RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          DELETE FROM entity_aliases WHERE entity_id IN (SELECT id FROM old_rows);
          DELETE FROM entity_mentions WHERE entity_id IN (SELECT id FROM old_rows);
          DELETE FROM relations WHERE (subject_kind = 'entity' AND subject_id IN (SELECT id FROM old_rows))
                                   OR (object_kind = 'entity' AND object_id IN (SELECT id FROM old_rows));
          RETURN NULL;
        END $$""",
    "drop cpersona_graph_entities_delete": "DROP TRIGGER IF EXISTS cpersona_graph_entities_delete ON entities",
    "trigger cpersona_graph_entities_delete": "CREATE TRIGGER cpersona_graph_entities_delete AFTER DELETE ON "
    "entities REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION cpersona_graph_entities_delete()",
    **_record_trigger("mem", "memories"),
    **_record_trigger("ep", "episodes"),
}


class PgAssociationRepo(AssociationRepo):
    """The declared graph over one connection (inside the caller's transaction)."""

    IGNORE = ("INSERT INTO", " ON CONFLICT DO NOTHING")
    MEMORY_ID = "CASE WHEN x.ref ~ '^mem:[0-9]{1,18}$' THEN CAST(substr(x.ref, 5) AS BIGINT) END"
    EPISODE_ID = "CASE WHEN x.ref ~ '^ep:[0-9]{1,18}$' THEN CAST(substr(x.ref, 4) AS BIGINT) END"

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(qmark(conn))
        self.pg = conn

    def insert_entity(self, d: EntityDraft) -> int:
        return int(scalar(self.pg, "INSERT INTO entities (agent_id, project_id, channel, name, normalized, "
                                   "declared_by, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                          (d.agent_id, d.project_id, d.channel, d.name, d.normalized, d.declared_by, d.created_at)))

    def _memory_filter(self, scope: Scope, source_id: str) -> tuple[str, list]:
        """postgres/scope.py's filter (its only `%s` are its markers) with `?` markers."""
        where, params = row_filter(scope, source_id)
        return where.replace("%s", "?"), params
