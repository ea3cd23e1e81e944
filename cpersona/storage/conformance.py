"""Both backends implement the storage contract (storage/ports/): each function below returns
a SQLite and a PostgreSQL object as the Protocol they must satisfy, so mypy fails on any
missing member or signature drift of either — the database, the session and every
repository. Checked by mypy only: nothing imports this module (it needs psycopg)."""

from __future__ import annotations

from cpersona.storage import ports
from cpersona.storage.db import Database
from cpersona.storage.postgres.db import PgDatabase
from cpersona.storage.postgres.session import PgSession
from cpersona.storage.session import Session


def databases(sqlite: Database, pg: PgDatabase) -> list[ports.Database]:
    return [sqlite, pg]


def sessions(sqlite: Session, pg: PgSession) -> list[ports.Session]:
    return [sqlite, pg]


def memories(sqlite: Session, pg: PgSession) -> list[ports.Memories]:
    return [sqlite.memories, pg.memories]


def episodes(sqlite: Session, pg: PgSession) -> list[ports.Episodes]:
    return [sqlite.episodes, pg.episodes]


def profiles(sqlite: Session, pg: PgSession) -> list[ports.Profiles]:
    return [sqlite.profiles, pg.profiles]


def search(sqlite: Session, pg: PgSession) -> list[ports.Search]:
    return [sqlite.search, pg.search]


def tasks(sqlite: Session, pg: PgSession) -> list[ports.Tasks]:
    return [sqlite.tasks, pg.tasks]


def meta(sqlite: Session, pg: PgSession) -> list[ports.Meta]:
    return [sqlite.meta, pg.meta]


def vectors(sqlite: Session, pg: PgSession) -> list[ports.Vectors]:
    return [sqlite.vectors, pg.vectors]


def agents(sqlite: Session, pg: PgSession) -> list[ports.Agents]:
    return [sqlite.agents, pg.agents]


def journal(sqlite: Session, pg: PgSession) -> list[ports.Journal]:
    return [sqlite.journal, pg.journal]


def dump(sqlite: Session, pg: PgSession) -> list[ports.Dump]:
    return [sqlite.dump, pg.dump]


def bulk(sqlite: Session, pg: PgSession) -> list[ports.Bulk]:
    return [sqlite.bulk, pg.bulk]


def transfer(sqlite: Session, pg: PgSession) -> list[ports.Transfer]:
    return [sqlite.transfer, pg.transfer]


def repairs(sqlite: Session, pg: PgSession) -> list[ports.Repairs]:
    return [sqlite.repairs, pg.repairs]


def integrity(sqlite: Session, pg: PgSession) -> list[ports.Integrity]:
    return [sqlite.integrity, pg.integrity]


def inventory(sqlite: Session, pg: PgSession) -> list[ports.Inventory]:
    return [sqlite.inventory, pg.inventory]


def associations(sqlite: Session, pg: PgSession) -> list[ports.Associations]:
    return [sqlite.associations, pg.associations]
