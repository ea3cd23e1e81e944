"""Row defects of the text tables and their repairs (the SQL behind `cpersona/health/`):
markers and mentions in content, oversized and blank content, duplicates across channels,
malformed JSON, unparseable or mixed-format timestamps, non-canonical sources, oversized
profiles.

Every repair statement carries `locked = 0` itself, so no repair can change a locked
memory whatever ran before it in the transaction. `agent` '' means every agent.
Timestamps are judged by SQLite's own date functions (`julianday`), the same parser
every time filter uses (https://www.sqlite.org/lang_datefunc.html).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from cpersona.storage import word_index
from cpersona.storage.scope import Scope

#: Characters `trim` removes when deciding that content is blank: space, \t, \n, \v, \f, \r
#: and the ideographic space U+3000.
BLANK = "char(32, 9, 10, 11, 12, 13, 12288)"
#: The timestamp forms, as GLOB patterns over a value SQLite can parse.
UTC_FORM = "({col} GLOB '*Z' OR {col} GLOB '*[+-]00:00')"
AWARE_FORM = "{col} GLOB '*[+-][0-9][0-9]:[0-9][0-9]'"
_CLASS = ("CASE WHEN " + UTC_FORM + " THEN 'utc' WHEN " + AWARE_FORM + " THEN 'aware' ELSE 'naive' END")
_PARSEABLE = "{col} IS NOT NULL AND {col} != '' AND julianday({col}) IS NOT NULL"
#: The anonymous User sentinel {type: User, id: "", name: ""} (for a valid JSON `source`;
#: IS, unlike =, never yields NULL for a missing key).
USER_SENTINEL = ("(json_type(source) IS 'object' AND json_extract(source, '$.type') IS 'User' AND "
                 "json_extract(source, '$.id') IS '' AND json_extract(source, '$.name') IS '')")
#: A source nobody is named in: `{}` / null, or that sentinel (CASE keeps the JSON
#: functions away from malformed text, which they would reject).
ANONYMOUS = f"CASE WHEN json_valid(source) THEN json(source) IN ('{{}}', 'null') OR {USER_SENTINEL} ELSE 0 END"
#: A valid, attributed source without a canonical `type`.
NONCANONICAL = (f"CASE WHEN json_valid(source) AND NOT ({ANONYMOUS}) THEN json_type(source) != 'object' OR "
                "json_type(source, '$.type') IS NOT 'text' OR json_extract(source, '$.type') NOT IN "
                "('User', 'Agent', 'System') ELSE 0 END")


#: One code per memory timestamp: empty, bad (SQLite cannot parse it), or its form.
_TIMESTAMP_CODE = ("CASE WHEN timestamp = '' THEN 'empty' WHEN julianday(timestamp) IS NULL THEN 'bad' WHEN "
                   + UTC_FORM.format(col="timestamp") + " THEN 'utc' WHEN " + AWARE_FORM.format(col="timestamp")
                   + " THEN 'aware' ELSE 'naive' END")
#: One code per memory source: ok | anonymous | noncanonical | invalid. The first branches are
#: shortcuts for the shapes the write path stores (`{"type": "User", …}` without an empty
#: string cannot be the anonymous sentinel), so most rows cost one JSON parse, not five.
_SOURCE_CODE = (
    "CASE WHEN source IN ('{}', 'null') THEN 'anonymous' "
    "WHEN (source GLOB '{\"type\": \"User\"*' OR source GLOB '{\"type\": \"Agent\"*' "
    "OR source GLOB '{\"type\": \"System\"*') AND instr(source, '\"\"') = 0 "
    "THEN CASE WHEN json_valid(source) THEN 'ok' ELSE 'invalid' END "
    "WHEN NOT json_valid(source) THEN 'invalid' "
    f"WHEN {ANONYMOUS} THEN 'anonymous' WHEN {NONCANONICAL} THEN 'noncanonical' ELSE 'ok' END")


def agent_filter(agent: str, alias: str = "") -> tuple[str, list[str]]:
    """WHERE expression for one agent ('' = every agent)."""
    return Scope(agent_id=agent or None).predicate(alias)


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class RepairRepo:
    """Detection queries and guarded repairs over one connection. The SQL fragments that
    depend on the engine's JSON and date functions are class attributes (the PostgreSQL
    repository overrides them); the statements around them are standard SQL."""

    #: content empty or blank, a JSON text that parses, a parseable date
    BLANK_TEST = f"trim(content, {BLANK}) = ''"
    JSON_VALID = "json_valid({col})"
    PARSEABLE = _PARSEABLE
    TIME_CLASS = _CLASS
    TIMESTAMP_CODE = _TIMESTAMP_CODE
    SOURCE_CODE = _SOURCE_CODE
    NONCANONICAL = NONCANONICAL

    def __init__(self, conn: sqlite3.Connection, word_index: bool = False) -> None:
        self.conn = conn
        self.word_index = word_index  # keep `memories_words` in step (storage.word_index)

    def _rows(self, sql: str, agent: str, *params: object) -> list[tuple]:
        where, agent_params = agent_filter(agent)
        return self.conn.execute(sql.replace("{agent}", where), [*params, *agent_params]).fetchall()

    # ------------------------------------------------------------ census
    def census(self, agent: str, max_chars: int, markers: tuple[str, ...]) -> dict[str, Any]:
        """Every memory-row defect counted in ONE scan of the table (a 100k-row store is read
        once, not once per check): rows; content holding each of `markers`
        ("contains:<marker>"), longer than `max_chars`, blank; malformed JSON; unparseable
        timestamps and the count of each timestamp form ("form:utc" …); non-canonical and
        anonymous sources; vectors (missing, missing and locked, present, shortest and
        longest in bytes — None without vectors)."""
        where, params = agent_filter(agent)
        counted = [(f"contains:{m}", "content LIKE ? ESCAPE '\\'") for m in markers]
        counted += [
            ("oversized", "length(content) > ?"), ("blank", self.BLANK_TEST),
            ("bad_json", f"metadata != '{{}}' AND NOT {self.JSON_VALID.format(col='metadata')} "
                         f"OR ({self.SOURCE_CODE}) = 'invalid'"),
            ("bad_timestamp", f"({self.TIMESTAMP_CODE}) = 'bad'"),
            *((f"form:{form}", f"({self.TIMESTAMP_CODE}) = '{form}'") for form in ("utc", "aware", "naive")),
            ("noncanonical_source", f"({self.SOURCE_CODE}) = 'noncanonical'"),
            ("anonymous_source", f"({self.SOURCE_CODE}) = 'anonymous'"),
            ("null_vector", "embedding IS NULL"), ("null_vector_locked", "embedding IS NULL AND locked <> 0"),
            ("vectors", "embedding IS NOT NULL"),
        ]
        sums = ", ".join(f"COALESCE(SUM(CASE WHEN {expr} THEN 1 ELSE 0 END), 0)" for _, expr in counted)
        sql = (f"SELECT COUNT(*), {sums}, MIN(length(embedding)), MAX(length(embedding)) FROM memories "
               f"WHERE {where}")
        row = self.conn.execute(sql, [*(_like(m) for m in markers), max_chars, *params]).fetchone()
        return dict(zip(["rows", *(k for k, _ in counted), "min_vector_bytes", "max_vector_bytes"], row))

    # ------------------------------------------------------------ content
    def memories_containing(self, text: str, agent: str) -> list[tuple[int, str, int]]:
        """(id, content, locked) of memories whose content contains `text` (literal)."""
        return self._rows("SELECT id, content, locked FROM memories WHERE content LIKE ? ESCAPE '\\' AND {agent} "
                          "ORDER BY id", agent, _like(text))

    def oversized_memories(self, max_chars: int, agent: str) -> list[tuple[int, str, int]]:
        """(id, content, locked) of memories longer than `max_chars` characters."""
        return self._rows("SELECT id, content, locked FROM memories WHERE length(content) > ? AND {agent} ORDER BY id",
                          agent, max_chars)

    def non_text_rows(self, table: str, agent: str) -> list[tuple[int, str, int]]:
        """(id, text as it reads, locked — 0 for an episode) of the memories (content) or
        episodes (summary) whose text is not clean UTF-8 text — a BLOB, TEXT whose bytes are
        not UTF-8, or holding NUL (another program wrote them; reads show U+FFFD for bytes
        that are not UTF-8, storage/text_columns.py). SQLite only: PostgreSQL's text holds
        valid text only."""
        column, locked = {"memories": ("content", "locked"), "episodes": ("summary", "0")}[table]
        return self._rows(f"SELECT id, CAST({column} AS TEXT), {locked} FROM {table} WHERE NOT "
                          f"cpersona_is_clean_text(typeof({column}), CAST({column} AS BLOB)) AND {{agent}} ORDER BY id",
                          agent)

    def rewrite_episode_summary(self, episode_id: int, summary: str) -> bool:
        """Replace an episode's summary and drop its vector (the FTS index follows by trigger)."""
        sql = "UPDATE episodes SET summary = ?, embedding = NULL WHERE id = ?"
        return self.conn.execute(sql, (summary, episode_id)).rowcount > 0

    def blank_memories(self, agent: str) -> list[tuple[int, int]]:
        """(id, locked) of memories whose content is empty or whitespace only."""
        return self._rows(f"SELECT id, locked FROM memories WHERE {self.BLANK_TEST} AND {{agent}} ORDER BY id", agent)

    def rewrite_memory(self, memory_id: int, content: str) -> str:
        """Replace an unlocked memory's content and drop its vector (the trigram index follows
        by trigger, the word index here). When another memory of the same agent, project and channel already has
        that content, the row is deleted instead. Returns "rewritten" | "deleted" | "locked"."""
        try:
            cur = self.conn.execute("UPDATE memories SET content = ?, embedding = NULL WHERE id = ? AND locked = 0",
                                    (content, memory_id))
        except sqlite3.IntegrityError:
            return "deleted" if self.delete_memory(memory_id) else "locked"
        if not cur.rowcount:
            return "locked"
        if self.word_index:
            word_index.put(self.conn, memory_id, content, replace=True)
        return "rewritten"

    def delete_memory(self, memory_id: int) -> bool:
        """Delete an unlocked memory; False when it is locked or gone."""
        return self.conn.execute("DELETE FROM memories WHERE id = ? AND locked = 0", (memory_id,)).rowcount > 0

    def duplicate_rows(self, agent: str) -> list[tuple[int, str, int, int]]:
        """(id, channel, locked, group) of memories sharing agent, project and exact content
        with another memory (in another channel); `group` = the smallest id of the group."""
        where, params = agent_filter(agent, "m")
        sql = (f"SELECT m.id, m.channel, m.locked, d.gid FROM memories m JOIN (SELECT agent_id, project_id, content, "
               f"MIN(id) AS gid FROM memories m WHERE {where} GROUP BY agent_id, project_id, content "
               "HAVING COUNT(*) > 1) d ON d.agent_id = m.agent_id AND d.project_id = m.project_id "
               "AND d.content = m.content ORDER BY d.gid, m.id")
        return self.conn.execute(sql, params).fetchall()

    # --------------------------------------------------------------- JSON
    def invalid_json(self, agent: str) -> list[tuple[int, int, int, int]]:
        """(id, source invalid, metadata invalid, locked) of memories with malformed JSON."""
        source, metadata = self.JSON_VALID.format(col="source"), self.JSON_VALID.format(col="metadata")
        return self._rows(f"SELECT id, NOT {source}, NOT {metadata}, locked FROM memories "
                          f"WHERE (NOT {source} OR NOT {metadata}) AND {{agent}} ORDER BY id", agent)

    def reset_json(self, memory_id: int, column: str) -> bool:
        """Set `source` or `metadata` of an unlocked memory to '{}' if it is still malformed."""
        if column not in ("source", "metadata"):
            raise ValueError(column)
        valid = self.JSON_VALID.format(col=column)
        sql = f"UPDATE memories SET {column} = '{{}}' WHERE id = ? AND locked = 0 AND NOT {valid}"
        return self.conn.execute(sql, (memory_id,)).rowcount > 0

    # ---------------------------------------------------------- timestamps
    def unparseable_timestamps(self, agent: str) -> list[tuple[int, str, str, int]]:
        """(id, timestamp, created_at, locked) of memories with a non-empty timestamp
        SQLite cannot parse (e.g. "yesterday")."""
        return self._rows("SELECT id, timestamp, created_at, locked FROM memories WHERE timestamp != '' "
                          f"AND NOT ({self.PARSEABLE.format(col='timestamp')}) AND {{agent}} ORDER BY id", agent)

    def set_memory_timestamp(self, memory_id: int, old: str, new: str) -> bool:
        """Replace an unlocked memory's timestamp if it is still `old`."""
        return self.conn.execute("UPDATE memories SET timestamp = ? WHERE id = ? AND timestamp = ? AND locked = 0",
                                 (new, memory_id, old)).rowcount > 0

    def aware_timestamps(self, agent: str) -> list[tuple[int, str, int]]:
        """(id, timestamp, locked) of memories whose timestamp has a non-UTC offset."""
        col = "timestamp"
        sql = (f"SELECT id, timestamp, locked FROM memories WHERE {self.PARSEABLE.format(col=col)} AND "
               f"{self.TIME_CLASS.format(col=col)} = 'aware' AND {{agent}} ORDER BY id")
        return self._rows(sql, agent)

    def episodes_without_start(self, agent: str) -> list[tuple[int, str | None, str]]:
        """(id, start_time, created_at) of episodes whose start_time is NULL or '' while their
        end_time is set (a half span). An episode with neither was archived without a
        history: it has no span, which is its normal shape, not a defect."""
        return self._rows("SELECT id, start_time, created_at FROM episodes WHERE "
                          "(start_time IS NULL OR start_time = '') AND end_time IS NOT NULL AND end_time != '' "
                          "AND {agent} ORDER BY id", agent)

    def episode_time_forms(self, agent: str) -> dict[str, int]:
        """{"utc"|"aware"|"naive": n} over the episodes' parseable start and end times."""
        parts = [f"SELECT {self.TIME_CLASS.format(col=c)} AS form FROM episodes WHERE "
                 f"{self.PARSEABLE.format(col=c)} AND {{agent}}" for c in ("start_time", "end_time")]
        where, params = agent_filter(agent)
        union = " UNION ALL ".join(p.replace("{agent}", where) for p in parts)
        sql = f"SELECT form, COUNT(*) FROM ({union}) AS forms GROUP BY form"
        return dict(self.conn.execute(sql, params + params).fetchall())

    def episode_times(self, agent: str, form: str) -> list[tuple[int, str, str, str]]:
        """(id, column, value, created_at) of episode start/end times of one form."""
        out: list[tuple[int, str, str, str]] = []
        for col in ("start_time", "end_time"):
            sql = (f"SELECT id, '{col}', {col}, created_at FROM episodes WHERE {self.PARSEABLE.format(col=col)} "
                   f"AND {self.TIME_CLASS.format(col=col)} = ? AND {{agent}} ORDER BY id")
            out.extend(self._rows(sql, agent, form))
        return out

    def set_episode_time(self, episode_id: int, column: str, old: str | None, new: str) -> bool:
        """Replace an episode's start_time / end_time if it is still `old` (None = NULL)."""
        if column not in ("start_time", "end_time"):
            raise ValueError(column)
        sql = (f"UPDATE episodes SET {column} = ? WHERE id = ? AND ({column} = ? OR ({column} IS NULL AND "
               "CAST(? AS TEXT) IS NULL))")
        return self.conn.execute(sql, (new, episode_id, old, old)).rowcount > 0

    # ------------------------------------------------------------- sources
    def noncanonical_sources(self, agent: str, limit: int) -> tuple[int, list[tuple[int, str, int]]]:
        """(how many, the first `limit` as (id, source, locked)) of memories whose valid
        JSON source is not anonymous and has no `type` of User / Agent / System."""
        where, params = agent_filter(agent)
        total = self.conn.execute(f"SELECT COUNT(*) FROM memories WHERE ({self.NONCANONICAL}) AND {where}",
                                  params).fetchone()[0]
        sql = f"SELECT id, source, locked FROM memories WHERE ({self.NONCANONICAL}) AND {where} ORDER BY id LIMIT ?"
        return total, self.conn.execute(sql, [*params, limit]).fetchall() if total else []

    def set_source(self, memory_id: int, old: str, new: str) -> bool:
        """Replace an unlocked memory's source if it is still `old`."""
        return self.conn.execute("UPDATE memories SET source = ? WHERE id = ? AND source = ? AND locked = 0",
                                 (new, memory_id, old)).rowcount > 0

    # ------------------------------------------------------------ profiles
    def oversized_profiles(self, max_chars: int, agent: str) -> list[tuple[int, str, int]]:
        """(id, agent_id, length) of profiles longer than `max_chars` characters."""
        return self._rows("SELECT id, agent_id, length(content) FROM profiles WHERE length(content) > ? AND {agent} "
                          "ORDER BY id", agent, max_chars)

    def truncate_profile(self, profile_id: int, max_chars: int) -> bool:
        """Cut a profile to its first `max_chars` characters."""
        return self.conn.execute("UPDATE profiles SET content = substr(content, 1, ?) WHERE id = ? AND "
                                 "length(content) > ?", (max_chars, profile_id, max_chars)).rowcount > 0

    def agents_without_profile(self, agent: str) -> list[str]:
        """Agents owning memories but no profile row."""
        where, params = agent_filter(agent, "m")
        sql = (f"SELECT DISTINCT m.agent_id FROM memories m WHERE {where} AND NOT EXISTS "
               "(SELECT 1 FROM profiles p WHERE p.agent_id = m.agent_id) ORDER BY 1")
        return [r[0] for r in self.conn.execute(sql, params)]

    def project_ids(self, agent: str) -> list[tuple[str, int]]:
        """(project_id, rows) over memories and episodes."""
        where, params = agent_filter(agent)
        sql = (f"SELECT project_id, COUNT(*) FROM (SELECT project_id FROM memories WHERE {where} UNION ALL "
               f"SELECT project_id FROM episodes WHERE {where}) AS rows GROUP BY project_id ORDER BY project_id")
        return self.conn.execute(sql, params + params).fetchall()
