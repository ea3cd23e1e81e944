"""The check registry: every health check as one row, in the order they run and report.

The first 27 are the original CPersona's `check_health` registry (same names, issue types,
base severities and order, so agents and scripts written for it keep working); the rest
cover what this server adds: the embedding backend, the resident vector index, the
calibration file, failed queue rows, and files awaiting our migration.
"""

from __future__ import annotations

from cpersona.health import content, fields, operations, schema, vectors
from cpersona.health.model import Check

CHECKS: tuple[Check, ...] = (
    Check("memory_annotation", "info", "content holding '[Memory from …]' markers → markers stripped",
          content.detect_annotation, content.fix_annotation),
    Check("discord_mention", "info", "content holding <@id> chat mentions → mentions stripped",
          content.detect_mention, content.fix_mention),
    Check("oversized_content", "warn", "content longer than CPERSONA_MAX_CONTENT_LENGTH → truncated",
          content.detect_oversized, content.fix_oversized),
    Check("duplicate_content", "warn", "the same content of one agent and project in several channels → channel "
          "copies of a row that every channel already sees are deleted", content.detect_duplicates,
          content.fix_duplicates, review="each group has no channel-less copy: keep the rows or merge them by hand"),
    Check("embedding_dimension", "critical", "stored vectors whose length does not fit the recorded dimension → "
          "vector dropped and re-embedded", vectors.detect_dimension, vectors.fix_dimension,
          issue="embedding_dimension_mismatch"),
    Check("null_embedding", "warn", "memories without a vector → re-embedded (≤500 per run; "
          "those the running task queue is embedding are `queued`, info)",
          vectors.detect_null_memories, vectors.fix_null_memories,
          review="rows get their vectors once the embedding backend answers (the task queue embeds them)"),
    Check("null_episode_embedding", "warn", "episodes without a vector → re-embedded (≤500 per run; "
          "those the running task queue is embedding are `queued`, info)",
          vectors.detect_null_episodes, vectors.fix_null_episodes,
          review="rows get their vectors once the embedding backend answers (the task queue embeds them)"),
    Check("fts_integrity", "warn", "FTS5 index damaged or out of step with its table → rebuilt",
          schema.detect_fts, schema.fix_fts, issue="fts_integrity_failure", scope="global"),
    Check("schema_version", "critical", "recorded schema version differs from this cpersona's",
          schema.detect_version, issue="schema_version_mismatch", scope="global"),
    Check("dedup_msg_id_index", "critical", "the msg_id dedup index is missing → colliding msg_ids of older "
          "unlocked rows blanked, index created", schema.detect_msg_id_index, schema.fix_msg_id_index,
          issue="dedup_msg_id_index_missing", scope="global",
          review="locked memories share a message id: unlock or delete one of each pair"),
    Check("schema_objects", "warn", "a canonical index or trigger is missing or differs → recreated",
          schema.detect_objects, schema.fix_object, issue="schema_object_drift", scope="global",
          review="locked exact duplicates block the unique index: unlock or delete one of each",
          sqlite_only="compares the file's SQLite DDL; a PostgreSQL database's objects are kept by its migration"),
    Check("sqlite_integrity", "critical", "SQLite quick_check reports damage in the file",
          schema.detect_integrity, scope="global", unlocked=True,
          sqlite_only="page-level damage is the PostgreSQL server's to detect (data checksums, amcheck)"),
    Check("axis_hygiene", "warn", "project ids differing only in case or punctuation",
          operations.detect_axis, issue="project_id_naming_drift"),
    Check("invalid_json", "warn", "source or metadata that is not valid JSON → set to {}",
          fields.detect_json, fields.fix_json),
    Check("invalid_timestamp", "warn", "a timestamp SQLite cannot parse → the row's creation time",
          fields.detect_timestamp, fields.fix_timestamp),
    Check("missing_episode_start_time", "info", "episodes without a start time → their creation time",
          fields.detect_episode_start, fields.fix_episode_start),
    Check("timestamp_format_drift", "warn", "memory timestamps mix UTC, other offsets and no offset → offset "
          "times converted to UTC", fields.detect_drift, fields.fix_drift,
          review="timestamps without an offset have no known zone; they are left as they are"),
    Check("episode_timestamp_format_drift", "warn", "episode times mix forms → offset times converted to UTC",
          fields.detect_episode_drift, fields.fix_episode_drift,
          review="episode times without an offset have no known zone; they are left as they are"),
    Check("stale_pending_tasks", "warn", "queue rows older than 1 h → rows that can never run deleted",
          operations.detect_stale_tasks, operations.fix_stale_tasks,
          review="the embedding tasks wait for the backend and are kept"),
    Check("missing_profile", "info", "agents with memories but no profile", operations.detect_missing_profile),
    Check("empty_content", "warn", "blank content → row deleted", content.detect_empty, content.fix_empty),
    Check("invalid_source_type", "warn", "a source without type User/Agent/System → legacy shapes mapped",
          fields.detect_source_type, fields.fix_source_type,
          review="these sources have no known mapping; correct them by hand if they matter"),
    Check("oversized_profile", "warn", "profile longer than CPERSONA_MAX_PROFILE_LENGTH → truncated",
          content.detect_oversized_profile, content.fix_oversized_profile),
    Check("anonymous_source", "info", "memories whose source names nobody", fields.detect_anonymous),
    Check("vector_fallback_config", "info", "remote vector mode without local vectors",
          operations.detect_vector_fallback, issue="no_local_vector_fallback", scope="global", unlocked=True),
    Check("operating_context_parse", "warn", "the operating-context file exists but cannot be used",
          operations.detect_context_parse, issue="operating_context_parse_error", scope="global", unlocked=True),
    Check("operating_context_size", "info", "the operating-context summary is over 3000 characters",
          operations.detect_context_size, issue="operating_context_summary_oversized", scope="global", unlocked=True),
    # ---- beyond the original
    Check("embedding_backend", "warn", "the embedding backend answers with the recorded model and dimension",
          vectors.detect_backend, scope="global", unlocked=True),
    Check("vector_index", "warn", "the resident vector index holds what the table holds → reloaded",
          vectors.detect_index, vectors.fix_index, issue="vector_index_drift", scope="global", unlocked=True),
    Check("calibration_file", "warn", "the calibration file describes the stored vectors",
          operations.detect_calibration, issue="calibration_stale", scope="global", unlocked=True),
    Check("failed_tasks", "warn", "queue rows marked failed → re-queued, or deleted when they can never run",
          operations.detect_failed_tasks, operations.fix_failed_tasks,
          review="the embedding backend is not answering; the tasks are kept for when it does"),
    Check("migration_pending", "info", "a file written by another release, not yet opened by this server",
          schema.detect_migration, scope="global"),
    Check("content_not_text", "warn", "memory content or episode summary another program stored as bytes, as "
          "text that is not UTF-8 or holding NUL → rewritten as the text it reads as (U+FFFD for undecodable bytes)",
          content.detect_not_text, content.fix_not_text,
          sqlite_only="PostgreSQL's text type holds valid UTF-8 only"),
)

BY_NAME = {c.name: c for c in CHECKS}
#: Issue types accepted as check names too (`checks=["embedding_dimension_mismatch"]`).
BY_ISSUE = {c.issue_type: c for c in CHECKS}
NAMES = tuple(BY_NAME)


def select(names: list[str] | None) -> tuple[list[Check], list[str]]:
    """(checks to run in registry order, unknown names). None or [] = every check."""
    if not names:
        return list(CHECKS), []
    wanted = {BY_NAME.get(n) or BY_ISSUE.get(n) for n in names}
    unknown = sorted({n for n in names if n not in BY_NAME and n not in BY_ISSUE})
    return [c for c in CHECKS if c in wanted], unknown
