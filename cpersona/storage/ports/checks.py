"""The repositories of the health checks: row defects and their guarded repairs, the schema
and its lexical indexes, counts and row lists (SQLite: storage/repairs.py, integrity.py,
inventory.py; PostgreSQL: the same names under storage/postgres/). `agent` '' means every
agent. A repair changes an unlocked row only, and only while it still holds what was found:
True (or "rewritten"/"deleted") when it did."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

#: (id, text, locked) of a memory.
TextRow = tuple[int, str, int]


class Repairs(Protocol):
    """Detection queries and guarded repairs of row defects."""

    def census(self, agent: str, max_chars: int, markers: tuple[str, ...]) -> dict[str, Any]:
        """Every memory-row defect counted in one scan of the table (storage/repairs.py says which)."""

    def memories_containing(self, text: str, agent: str) -> list[TextRow]:
        """Memories whose content contains `text` (literally)."""

    def oversized_memories(self, max_chars: int, agent: str) -> list[TextRow]:
        """Memories longer than `max_chars` characters."""

    def non_text_rows(self, table: str, agent: str) -> list[TextRow]:
        """(id, text as it reads, locked — 0 for an episode) of rows whose text is not clean UTF-8."""

    def rewrite_episode_summary(self, episode_id: int, summary: str) -> bool:
        """Replace an episode's summary and drop its vector."""

    def blank_memories(self, agent: str) -> list[tuple[int, int]]:
        """(id, locked) of memories whose content is empty or whitespace only."""

    def rewrite_memory(self, memory_id: int, content: str) -> str:
        """Replace a memory's content and drop its vector; a row whose new content another
        memory of its agent, project and channel holds is deleted. "rewritten" | "deleted" | "locked"."""

    def delete_memory(self, memory_id: int) -> bool:
        """Delete an unlocked memory."""

    def duplicate_rows(self, agent: str) -> list[tuple[int, str, int, int]]:
        """(id, channel, locked, group: the smallest id) of memories sharing agent, project and
        exact content with one in another channel."""

    def invalid_json(self, agent: str) -> list[tuple[int, int, int, int]]:
        """(id, source invalid, metadata invalid, locked) of memories with malformed JSON."""

    def reset_json(self, memory_id: int, column: str) -> bool:
        """Set `source` or `metadata` to '{}' if it is still malformed."""

    def unparseable_timestamps(self, agent: str) -> list[tuple[int, str, str, int]]:
        """(id, timestamp, created_at, locked) of memories with a timestamp that cannot be parsed."""

    def set_memory_timestamp(self, memory_id: int, old: str, new: str) -> bool:
        """Replace a memory's timestamp if it is still `old`."""

    def aware_timestamps(self, agent: str) -> list[TextRow]:
        """(id, timestamp, locked) of memories whose timestamp has a non-UTC offset."""

    def episodes_without_start(self, agent: str) -> list[tuple[int, str | None, str]]:
        """(id, start_time, created_at) of episodes with an end time but no start time."""

    def episode_time_forms(self, agent: str) -> dict[str, int]:
        """{"utc"|"aware"|"naive": n} over the episodes' parseable start and end times."""

    def episode_times(self, agent: str, form: str) -> list[tuple[int, str, str, str]]:
        """(id, column, value, created_at) of episode start/end times of one form."""

    def set_episode_time(self, episode_id: int, column: str, old: str | None, new: str) -> bool:
        """Replace an episode's start_time / end_time if it is still `old` (None = NULL)."""

    def noncanonical_sources(self, agent: str, limit: int) -> tuple[int, list[TextRow]]:
        """(how many, the first `limit` as (id, source, locked)) of memories whose valid JSON
        source is not anonymous and has no `type` of User / Agent / System."""

    def set_source(self, memory_id: int, old: str, new: str) -> bool:
        """Replace a memory's source if it is still `old`."""

    def oversized_profiles(self, max_chars: int, agent: str) -> list[tuple[int, str, int]]:
        """(id, agent_id, length) of profiles longer than `max_chars` characters."""

    def truncate_profile(self, profile_id: int, max_chars: int) -> bool:
        """Cut a profile to its first `max_chars` characters."""

    def agents_without_profile(self, agent: str) -> list[str]:
        """Agents owning memories but no profile row."""

    def project_ids(self, agent: str) -> list[tuple[str, int]]:
        """(project_id, rows) over memories and episodes."""


class Integrity(Protocol):
    """The schema: page checks, tables, the lexical indexes and the dedup indexes."""

    def quick_check(self, limit: int = 10, stop: Callable[[], bool] | None = None) -> list[str]:
        """At most `limit` messages of SQLite's quick_check (["ok"]: sound; always so on
        PostgreSQL); `stop()` returning True ends it: StatementTimeout."""

    def size_bytes(self) -> int:
        """The bytes the store occupies."""

    def has_table(self, name: str) -> bool:
        """The table (or lexical index) exists."""

    def has_column(self, table: str, column: str) -> bool:
        """The column exists."""

    def schema_version(self) -> int | None:
        """The recorded schema version; None when there is none."""

    def original_opened_as_is(self, version: int) -> bool:
        """A newer file of the original's 2.6 line, opened in place (storage/originals.py)."""

    def fts_problem(self, fts: str, time_limit: float | None = None) -> str:
        """'' when the lexical index `fts` is sound and agrees with its table, else what is
        wrong; stopped after `time_limit` seconds: StatementTimeout."""

    def fts_rebuild(self, fts: str) -> str:
        """Rebuild the lexical index `fts` from its table; '' on success, else the error."""

    def object_sql(self, kind: str, name: str) -> str | None:
        """The stored definition of an index or trigger, or None when absent."""

    def replace_object(self, kind: str, name: str, ddl: str) -> str:
        """Drop (if present) and create one index or trigger; '' on success, else the error."""

    def content_duplicates_exist(self) -> bool:
        """Two memories share agent, project, channel and content (the dedup index cannot exist)."""

    def exact_duplicate_extras(self) -> list[tuple[int, int]]:
        """(id, locked) of memories repeating another's agent, project, channel and content,
        but one keeper per group (a locked row when there is one, else the oldest)."""

    def msg_id_collisions(self) -> list[tuple[int, int]]:
        """(id, locked) of memories whose non-empty msg_id repeats within agent and project,
        but the newest of each group."""

    def blank_msg_id(self, memory_id: int) -> bool:
        """Clear an unlocked memory's msg_id."""


class Inventory(Protocol):
    """Counts and row lists: vectors, queue rows, statistics, the deep check's reads."""

    def bad_vectors(self, table: str, expected_bytes: int | None, stale: tuple[int, int],
                    agent: str) -> list[tuple[int, int]]:
        """(id, byte length) of stored vectors that cannot belong to the active model (rows
        in the `stale` range awaiting re-embedding left out)."""

    def drop_vectors(self, table: str, ids: list[int]) -> int:
        """Set the vector of the listed rows (locked ones too) to NULL; how many."""

    def vector_counts(self, table: str, agent: str) -> tuple[int, int, int]:
        """(rows, rows without a vector, of those locked) of `table`."""

    def rows_without_vector(self, table: str, agent: str, limit: int,
                            skip_queued: bool = False) -> list[tuple[int, str]]:
        """(id, text) of unlocked rows without a vector, oldest first (with `skip_queued`: not
        those with a pending embed task)."""

    def queued_without_vector(self, table: str, agent: str) -> tuple[int, int]:
        """(rows without a vector that have a pending embed task, of those locked)."""

    def old_tasks(self, agent: str, seconds: int) -> list[tuple[int, str, str]]:
        """(id, task_type, payload) of pending queue rows queued more than `seconds` ago."""

    def failed_tasks(self, agent: str) -> list[tuple[int, str, str, str | None]] | None:
        """(id, task_type, payload, last_error) of failed queue rows; None when the queue
        table predates the failure columns."""

    def delete_task(self, task_id: int) -> bool:
        """Delete a queue row."""

    def requeue_task(self, task_id: int) -> bool:
        """Give a failed task a fresh start (retries 0, due now)."""

    def counts(self) -> dict[str, int]:
        """Rows of memories, episodes, profiles and queue tasks."""

    def agent_counts(self, agent: str) -> dict[str, int]:
        """The agent's memories and episodes."""

    def axis(self, column: str, agent: str, top: int) -> dict[str, int]:
        """{value: memories} of `project_id` / `channel`, largest first, at most `top`."""

    def memory_agents(self) -> list[str]:
        """Distinct agent ids owning memories."""

    def user_sentinel_rows(self, agent: str) -> list[tuple[int, str, str, int]]:
        """(id, content, source, locked) of memories whose source is the anonymous User sentinel."""

    def short_rows(self, agent: str, max_chars: int) -> list[TextRow]:
        """Memories whose trimmed content has at most `max_chars` characters."""

    def profile_updated(self, agent: str) -> str | None:
        """updated_at of the agent's newest profile row, or None."""

    def memory_days(self, agent: str) -> list[float]:
        """Julian days of the agent's parseable memory timestamps, ascending."""

    def episode_spans(self, agent: str) -> list[tuple[int, str, str, str, float, float, float | None]]:
        """(id, summary, start_time, end_time, start day, end day, archived day) of the agent's
        episodes with a parseable start and end (Julian days)."""

    def newest_vectors(self, agent: str, limit: int) -> list[tuple[int, str, bytes]]:
        """(id, content, vector bytes) of the agent's newest memories with a vector."""

    def embedded_memories(self, agent: str) -> int:
        """The agent's memories with a vector."""
