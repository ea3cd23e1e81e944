"""One row of the task queue as the worker sees it: its type and payload checked, or the
reason it can never run (so it is marked failed instead of retried forever)."""

from __future__ import annotations

import json

from cpersona.storage.tasks import EMBED, EMBEDDED_TABLES, REEMBED

_LEGACY = {
    "update_profile": "queued by an older cpersona that built profiles on the server; this server never "
    "summarises — compute the profile yourself and call update_profile",
    "archive_episode": "queued by an older cpersona that summarised episodes on the server; this server never "
    "summarises — call archive_episode with your summary",
}


class Task:
    """A due task: `table`/`row_id` of an embed task, or `error` when it cannot run."""

    __slots__ = ("agent_id", "error", "id", "payload", "retries", "row_id", "table", "type")

    def __init__(self, row: tuple) -> None:
        self.id, self.type, self.agent_id, self.payload, self.retries = row
        self.table: str = ""
        self.row_id: int = 0
        self.error: str | None = None
        if self.type in _LEGACY:
            self.error = f"task type {self.type!r} {_LEGACY[self.type]}"
        elif self.type == REEMBED:
            pass  # no payload: the re-embedding's progress lives in the recorded identity
        elif self.type != EMBED:
            self.error = f"unknown task type {self.type!r}"
        else:
            self._parse_embed()

    def _parse_embed(self) -> None:
        try:
            data = json.loads(self.payload)
        except (TypeError, ValueError) as err:
            self.error = f"malformed payload (not JSON: {err})"
            return
        if not isinstance(data, dict) or data.get("table") not in EMBEDDED_TABLES:
            self.error = 'malformed payload (expected {"table": "memories"|"episodes", "id": N})'
            return
        row_id = data.get("id")
        if isinstance(row_id, bool) or not isinstance(row_id, int) or row_id < 1:
            self.error = "malformed payload (id must be a positive integer)"
            return
        self.table, self.row_id = data["table"], row_id


#: (task, row) where row = (text, agent_id, project_id, channel, created_at, has no vector).
Work = list[tuple[Task, tuple]]
