"""The repositories of what agents write and recall reads: memories, episodes, profiles,
and the keyword search over them (SQLite: storage/memories.py, episodes.py, profiles.py,
search.py; PostgreSQL: the same names under storage/postgres/)."""

from __future__ import annotations

from typing import Any, Protocol

from cpersona.storage.records import EpisodeDraft, EpisodeRow, MemoryDraft, MemoryRow, RowRef
from cpersona.storage.scope import Scope


class Memories(Protocol):
    """The `memories` table. Writes refuse (errors.Refused) what the owner or the lock forbids."""

    def find_duplicate(self, d: MemoryDraft) -> tuple[str, int] | None:
        """(reason, existing id) when the memory is already visible to its own scope."""

    def insert(self, d: MemoryDraft, blob: bytes | None) -> RowRef | None:
        """The new row's ref, or None when a unique index refused it."""

    def check_writable(self, memory_id: int, owner: str | None) -> None:
        """Raise Refused when update/delete would be refused now (the guarded statement decides)."""

    def update_content(self, memory_id: int, owner: str | None, content: str, blob: bytes | None) -> RowRef:
        """Replace the content and its vector (None: NULL until the queue embeds it). Raises Refused."""

    def delete(self, memory_id: int, owner: str | None) -> RowRef:
        """Delete an unlocked memory (of `owner` when given). Raises Refused."""

    def set_locked(self, memory_id: int, owner: str | None, locked: bool) -> None:
        """Lock or unlock (idempotent). Raises Refused."""

    def fetch(self, ids: list[int], scope: Scope, source_id: str = "") -> dict[int, MemoryRow]:
        """Rows by id inside `scope` and the source filter (vanished rows left out)."""

    def newest(self, scope: Scope, source_id: str, limit: int) -> list[MemoryRow]:
        """The newest `limit` memories inside `scope`."""

    def texts(self, before_id: int | None, limit: int) -> list[tuple[int, str]]:
        """(id, content) of every agent's memories below `before_id` (None: from the newest), highest id first."""

    def ids_with_source(self, scope: Scope, source_id: str) -> list[int]:
        """Ids of the memories inside `scope` whose source.id starts with `source_id`."""

    def listing(self, scope: Scope, limit: int, before: tuple[str, int] | None = None) -> list[dict[str, Any]]:
        """Newest first; `before` = (created_at, id) of the last row already listed (the next page)."""

    def owned(self, memory_id: int, agent_id: str) -> tuple[str, str, str, str] | None:
        """(content, source JSON, timestamp, msg_id) of the memory if `agent_id` owns it."""

    def timestamp_span(self, scope: Scope) -> tuple[float, float] | None:
        """(min, max) Julian day of the parseable timestamps inside `scope`, or None."""

    def recall_stats(self, ids: list[int]) -> dict[int, tuple[int, str | None]]:
        """memory id → (recall_count, last_recalled_at)."""

    def bump_recalled(self, ids: list[int]) -> None:
        """recall_count + 1 and last_recalled_at = now."""


class Episodes(Protocol):
    """The `episodes` table (session summaries)."""

    def insert(self, d: EpisodeDraft, blob: bytes | None) -> RowRef:
        """The new row's ref."""

    def delete(self, episode_id: int, owner: str | None) -> str:
        """Delete an episode (of `owner` when given); its agent. Raises Refused."""

    def fetch(self, ids: list[int], scope: Scope) -> dict[int, EpisodeRow]:
        """Rows by id inside `scope` (vanished rows left out)."""

    def listing(self, scope: Scope, limit: int, before: tuple[str, int] | None = None) -> list[dict[str, Any]]:
        """Newest first; `before` = (created_at, id) of the last row already listed (the next page)."""

    def owned(self, episode_id: int, agent_id: str) -> EpisodeRow | None:
        """The episode if `agent_id` owns it."""

    def latest_created(self, scope: Scope) -> str | None:
        """created_at of the newest episode inside `scope` (the episode boundary)."""

    def dated(self, scope: Scope) -> list[tuple[int, str]]:
        """(id, start time, else creation time) of every episode inside `scope`, as stored."""


class Profiles(Protocol):
    """The `profiles` table (one text per agent)."""

    def get(self, agent_id: str) -> str:
        """The agent's profile text ('' when none)."""

    def upsert(self, agent_id: str, text: str) -> None:
        """Replace the agent's profile."""

    def newest(self, agent_id: str, limit: int) -> list[str]:
        """Texts of the agent's profiles, newest first."""


class Search(Protocol):
    """Keyword search: the trigram and word indexes (bm25 as FTS5 computes it), LIKE, counts."""

    #: The lexical indexes exist (else keyword search is LIKE only).
    fts_enabled: bool

    def memories_fts(self, expr: str, scope: Scope, source_id: str, limit: int) -> list[tuple[MemoryRow, float]]:
        """Memories matching the trigram MATCH expression `expr` inside `scope`: (row, bm25 rank), best first."""

    def memories_words(self, expr: str, scope: Scope, source_id: str, limit: int) -> list[tuple[MemoryRow, float]]:
        """Memories whose word index matches `expr` inside `scope`: (row, bm25 rank), best first."""

    def episodes_fts(self, expr: str, scope: Scope, limit: int) -> list[tuple[EpisodeRow, float]]:
        """Episodes (summary + keywords) matching `expr` inside `scope`: (row, bm25 rank), best first."""

    def memories_like(self, text: str, scope: Scope, source_id: str, limit: int) -> list[MemoryRow]:
        """Memories containing `text` (ASCII case-insensitive), newest first."""

    def pool_size(self, scope: Scope) -> int:
        """Memories + episodes inside `scope`."""

    def table_size(self, fts: str) -> int:
        """An upper bound of the rows behind the lexical index `fts`."""

    def term_doc_counts(self, fts: str, grams: list[str]) -> dict[str, int]:
        """Rows of the lexical index `fts` holding each term."""

    def database_file(self) -> str:
        """Which database this is, for per-database caches (SQLite: the file name, '' in memory)."""
