"""The isolation axes of a read: one helper builds every read predicate (SQL).

| axis       | None (omitted)  | ''                  | 'X'                          |
|------------|-----------------|---------------------|------------------------------|
| agent_id   | no filter       | agent_id = ''       | agent_id = 'X' (never union) |
| project_id | no filter       | project_id = ''     | project_id IN ('X', '')      |
| channel    | no filter       | no filter           | channel IN ('X', '')         |
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scope:
    """Which rows a read may see. Axes compose with AND; see the module table."""

    agent_id: str | None = None
    project_id: str | None = None
    channel: str | None = None

    def predicate(self, alias: str = "", use_index: bool = True) -> tuple[str, list[str]]:
        """SQL boolean expression and its parameters, e.g. ("m.agent_id = ? AND …", [..]).

        `alias` prefixes column names ("m" → "m.agent_id"). `use_index=False` writes the
        columns as `+m.agent_id` so SQLite filters with them instead of scanning an agent
        index — for lookups that already have row ids. Always returns a valid expression
        ("1 = 1" when no axis filters: a boolean in every SQL dialect).
        """
        col = ("" if use_index else "+") + (f"{alias}." if alias else "")
        clauses: list[str] = []
        params: list[str] = []
        if self.agent_id is not None:
            clauses.append(f"{col}agent_id = ?")
            params.append(self.agent_id)
        if self.project_id is not None:
            clauses.append(f"{col}project_id IN (?, '')")
            params.append(self.project_id)
        if self.channel:
            clauses.append(f"{col}channel IN (?, '')")
            params.append(self.channel)
        return (" AND ".join(clauses) or "1 = 1"), params

    def admits(self, agent_id: str, project_id: str, channel: str) -> bool:
        """Python mirror of `predicate` for one row (used by the in-memory vector index)."""
        if self.agent_id is not None and agent_id != self.agent_id:
            return False
        if self.project_id is not None and project_id not in (self.project_id, ""):
            return False
        return not self.channel or channel in (self.channel, "")


def source_id_predicate(source_id: str, alias: str = "") -> tuple[str, list[str]]:
    """Prefix match on the memory's `source.id` with LIKE wildcards escaped.

    Rows whose `source` is not valid JSON never match (and never raise).
    """
    col = f"{alias}." if alias else ""
    escaped = source_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    sql = (
        f"(json_valid({col}source) AND json_type({col}source) = 'object' "
        f"AND CAST(json_extract({col}source, '$.id') AS TEXT) LIKE ? ESCAPE '\\')"
    )
    return sql, [escaped + "%"]
