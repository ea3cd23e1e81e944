"""The repositories of moving data in and out: the bulk-write journal, whole-table reads for
export, whole-row writes for import and merge, the copy between stores of `cpersona
migrate` (SQLite: storage/journal.py, dump.py, bulk.py, transfer.py; PostgreSQL: the same
names under storage/postgres/)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from cpersona.storage.journal import Op
from cpersona.storage.records import RowRef


class Journal(Protocol):
    """The bulk-write journal that makes a chunked import, merge or move all-or-nothing
    (storage/journal.py says what each action records)."""

    def begin(self, kind: str, owner: str, detail: dict[str, Any]) -> int:
        """Open an operation in phase `writing`; its id."""

    def note(self, op: int, action: str, table: str, row_id: int, prior: dict[str, Any] | None = None) -> None:
        """Record one effect of `op`."""

    def set_phase(self, op: int, phase: str) -> None:
        """The commit point (`done`, or `deleting` for a move)."""

    def ops(self) -> list[Op]:
        """Every journaled operation."""

    def claim(self, table: str, row_id: int) -> bool:
        """A write outside any bulk operation takes row `row_id` of `table` over: an unfinished
        operation's undo leaves it. False, claiming nothing, when that undo must not."""

    def journaled(self, table: str, row_id: int) -> bool:
        """Whether an unfinished operation wrote or is to delete row `row_id` of `table`."""

    def claim_profile(self, agent_id: str) -> None:
        """`claim` the agent's profile row."""

    def undo(self, op: int, limit: int) -> list[tuple[str, int]]:
        """Undo up to `limit` effects of `op`, newest first: the (table, id) of the rows removed."""

    def redo_deletes(self, op: int, limit: int) -> list[tuple[str, int]]:
        """Delete up to `limit` source rows a move past its commit point still has to: (table, id) deleted."""

    def forget(self, op: int, limit: int) -> int:
        """Drop up to `limit` journal rows of a finished `op` (the op once none is left); how many."""


class Dump(Protocol):
    """Whole tables as dicts, for export (any schema version)."""

    def count(self, table: str, agent: str | None) -> int:
        """Rows of `table` (of `agent`; None = every agent); 0 when the table is absent."""

    def rows(self, table: str, agent: str | None, with_embedding: bool = False) -> Iterator[dict[str, Any]]:
        """Every row of `table` (of `agent`; None = all) in id order (+ `embedding` when asked)."""

    def row(self, table: str, row_id: int, with_embedding: bool = False) -> dict[str, Any] | None:
        """Row `row_id` of `table` as `rows` gives it (None when it is gone)."""


class Bulk(Protocol):
    """Whole-row writes and exact duplicate probes for import and merge."""

    def msg_id_taken(self, agent: str, project: str, msg_id: str) -> bool:
        """A memory of the agent and project holds this non-empty msg_id."""

    def content_taken(self, agent: str, project: str, channel: str, content: str) -> bool:
        """A memory holds exactly this content in this agent, project and channel."""

    def episode_taken(self, agent: str, project: str, channel: str, summary: str) -> bool:
        """An episode holds exactly this summary in this agent, project and channel."""

    def memory_with_msg_id(self, agent: str, project: str, msg_id: str) -> int | None:
        """The id of the memory of the agent and project holding this non-empty msg_id, or None."""

    def memory_with_content(self, agent: str, project: str, channel: str, content: str) -> int | None:
        """The id of the memory holding exactly this content in this agent, project and channel, or None."""

    def episode_with_summary(self, agent: str, project: str, channel: str, summary: str) -> int | None:
        """The id of the (first) episode holding exactly this summary in this agent, project and channel."""

    def profile(self, agent: str, user_id: str) -> dict[str, Any] | None:
        """{id, content, updated_at, project_id} of the (agent, user_id) profile, or None."""

    def insert_memory(self, row: Mapping[str, Any], blob: bytes | None) -> RowRef | None:
        """Insert a memory with all its fields (created_at kept, now when absent); None when a
        unique index refused it."""

    def insert_episode(self, row: Mapping[str, Any], blob: bytes | None) -> RowRef:
        """Insert an episode with all its fields (created_at kept, now when absent)."""

    def put_profile(self, agent: str, user_id: str, content: str, updated_at: str | None, project_id: str) -> int:
        """Insert or overwrite the (agent, user_id) profile; its row id."""

    def delete_pending_tasks(self, agent: str) -> int:
        """Delete the agent's queued tasks; how many."""

    def left(self, agent: str) -> dict[str, int]:
        """{memories, episodes, profiles} the agent still owns."""

    def bridge_channel_rows(self, agent: str | None) -> tuple[list[tuple[int, str, str]], list[tuple[int, bool]]]:
        """Memories filed under the bridge channel 'discord': (recoverable [(id, channel,
        session_id)], unrecoverable [(id, metadata is valid JSON)])."""

    def set_channel(self, memory_id: int, channel: str) -> bool:
        """Set one memory's channel unless that collides with the content unique index; True when changed."""


class Transfer(Protocol):
    """Rows with their ids, for `cpersona migrate` between stores."""

    def count(self, table: str) -> int:
        """Rows of `table`."""

    def max_id(self, table: str) -> int:
        """Largest key of `table` (storage/transfer.py: `key`, its id or its entity; 0 when empty)."""

    def rows(self, table: str, after_id: int, limit: int) -> list[tuple]:
        """Rows with a key > after_id, in key order (at most `limit` ids: of entities for the tables
        keyed by entity, whose every row comes along), as tuples of storage/transfer.py: COLUMNS[table]."""

    def insert_rows(self, table: str, rows: list[tuple]) -> int:
        """Insert rows with their ids; rows whose id exists are skipped. How many went in."""

    def meta_items(self) -> list[tuple[str, str]]:
        """(key, JSON text) of every cpersona_meta entry but the word index's form, by key."""

    def put_meta_items(self, items: list[tuple[str, str]]) -> None:
        """Store (key, JSON text) entries, replacing those of the same key."""

    def finish(self) -> None:
        """After a copy: bring in step what is derived, not copied (PostgreSQL: the id sequences,
        the word index)."""
