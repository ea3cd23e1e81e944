"""The pieces every health check is made of.

* `Check` — one row of the registry: name, issue type, base severity, description, and
  the `detect` / `fix` functions. Checks are data; the runner only walks the table.
* `Context` — what a check sees: one storage session (read, or THE write transaction of a
  fix run), the agent scope, the embedding probe, the recorded vector identity.
* `HealthEnv` — the collaborators of a run (database, embedding backend, resident index,
  task queue, pause), built by the service layer for the server or for `cpersona checkup`.
* `finish` — the severity policy applied to every issue.

An issue is a plain dict: `type`, `severity`, `check`, then the check's own fields. A check
with a fix declares `repairable`: the rows or objects THIS run's fix would write (None =
unknown); an issue its check's fix never handles says `fixable: False` instead.
`repairable == 0` means a person must look (`needs_human_review`), and a warn becomes info
(nothing automatic can be done, so it does not degrade the status); critical is never
lowered. An issue marked `expected` (e.g. rows without vectors when no embedding backend
is configured) is a fact of the configuration, not a case for review.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from cpersona.config import Settings
from cpersona.embedding.base import Embedder
from cpersona.index.resident import ResidentIndexes
from cpersona.policy.pause import Pause
from cpersona.policy.projects import OperatingContext
from cpersona.storage import Database, Session
from cpersona.storage.meta import VectorState
from cpersona.storage.records import RowRef

Severity = Literal["critical", "warn", "info"]
Issue = dict[str, Any]
#: Ids listed in an issue (the rest are counted only).
SAMPLE = 10
#: Text the content checks look for: the chat bridge's recall marker, a Discord mention.
MARKER_TEXT = "[Memory from"
MENTION_TEXT = "<@"


class NotApplicable(Exception):
    """Raised by `detect` when the check cannot apply here (FTS off, no backend…); the
    reason is listed under `skipped` in the report."""


@dataclass(frozen=True)
class Probe:
    """The embedding backend's answer to one probe text.

    status: "ok" | "none" (no backend configured) | "loading" | "failed".
    """

    status: str
    model: str | None = None
    dim: int | None = None
    error: str = ""


@dataclass
class HealthEnv:
    """Collaborators of a run. Only `settings` and `db` are required: a report on a file
    nobody serves (`cpersona checkup`) has no resident index, no queue and no pause.

    embed: vectors for texts (the gateway's `embed_batch`), used by fix runs to re-embed.
    keep_vector: returns the vector if the database still records this backend's model
        (checked inside the write transaction), else None.
    enqueue_embed: queues the embedding of a row inside a write transaction.
    after_repairs: called after a fix run changed rows or vectors (reload the resident
        index, wake the queue).
    refresh: notices another process's commits before the resident index is compared.
    queue_draining: whether a task queue of this process is embedding queued rows (a server's);
        a fix run then leaves those rows to it.
    """

    settings: Settings
    db: Database
    embedder: Embedder | None = None
    embed: Callable[[list[str]], np.ndarray] | None = None
    keep_vector: Callable[[Session, np.ndarray], np.ndarray | None] | None = None
    resident: ResidentIndexes | None = None
    operating_context: OperatingContext | None = None
    enqueue_embed: Callable[[Session, str, RowRef], bool] | None = None
    after_repairs: Callable[[], None] = lambda: None
    refresh: Callable[[], None] = lambda: None
    pause: Pause | None = None
    queue_draining: Callable[[], bool] = lambda: False


@dataclass
class Context:
    """One check's view of the store. `writing` is True inside the fix transaction."""

    session: Session
    env: HealthEnv
    #: The scope of the current check: the run's agent, or '' for a global check.
    agent: str
    probe: Probe
    state: VectorState
    writing: bool = False
    #: The agent the run was asked about ('' = every agent).
    run_agent: str = ""
    #: Seconds a check may hold the file's write lock outside a fix run (None = no limit).
    lock_limit: float | None = None
    #: (table, id) → (text, vector) computed before the write transaction.
    prefetched: dict[tuple[str, int], tuple[str, np.ndarray]] = field(default_factory=dict)
    prefetch_error: str = ""
    #: Rows whose vector a repair dropped (re-embedded after the transaction).
    dropped: list[tuple[str, int]] = field(default_factory=list)
    changed: bool = False
    _census: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def s(self) -> Session:
        return self.session

    @property
    def settings(self) -> Settings:
        return self.env.settings

    def census(self) -> dict[str, Any]:
        """Counts of every memory-row defect in the current scope, from ONE table scan
        shared by the checks (`RepairRepo.census`); a check with nothing counted skips its
        own query."""
        if self.agent not in self._census:
            self._census[self.agent] = self.session.repairs.census(
                self.agent, self.settings.max_content_length, (MARKER_TEXT, MENTION_TEXT))
        return self._census[self.agent]

    def forget_census(self) -> None:
        """A repair changed rows: the next check counts again."""
        self._census.clear()

    @contextmanager
    def fts_session(self) -> Iterator[Session]:
        """Where the FTS5 'integrity-check' can run: the write transaction itself, or a
        scratch transaction that is rolled back (SQLite runs the command as a write)."""
        if self.writing:
            yield self.session
        else:
            with self.env.db.scratch() as scratch:
                yield scratch

    def vector_dropped(self, table: str, row_id: int) -> None:
        """A repair NULLed the row's vector: queue its embedding (same transaction) and
        re-embed it after the transaction."""
        self.changed = True
        self.dropped.append((table, row_id))
        row = self.session.vectors.pending_row(table, row_id)
        if row is not None and self.env.enqueue_embed is not None:
            self.env.enqueue_embed(self.session, table, RowRef(row_id, row[1], row[2], row[3], row[4]))

    def row_deleted(self, table: str, row_id: int) -> None:
        """A repair deleted the row: its queued embedding goes with it."""
        self.changed = True
        self.session.tasks.drop_embed(table, row_id)


Detect = Callable[[Context], list[Issue]]
Fix = Callable[[Context, Issue], dict[str, Any]]


@dataclass(frozen=True)
class Check:
    """One registry entry.

    name: the registry name accepted in `checks` (e.g. "embedding_dimension").
    issue: the `type` of its issues (e.g. "embedding_dimension_mismatch"); default name.
    scope: "agent" checks honour agent_id; "global" checks look at the whole file.
    unlocked: runs outside the write transaction even in a fix run (a whole-file scan,
        or state that is not in the database).
    review: what a person should do when nothing can be repaired automatically.
    sqlite_only: why the check does not apply to a PostgreSQL database ('' = it does).
    """

    name: str
    severity: Severity
    description: str
    detect: Detect
    fix: Fix | None = None
    issue: str = ""
    scope: Literal["agent", "global"] = "agent"
    unlocked: bool = False
    review: str = ""
    sqlite_only: str = ""

    @property
    def issue_type(self) -> str:
        return self.issue or self.name


def finish(check: Check, issue: Issue) -> Issue:
    """Apply the severity policy to one issue of `check` (see the module docstring)."""
    out = {"type": issue.get("type") or check.issue_type, "severity": issue.get("severity") or check.severity,
           "check": check.name, **{k: v for k, v in issue.items() if k not in ("type", "severity", "check")}}
    if check.fix is None or out["type"] == "check_crashed" or out.pop("fixable", True) is False:
        return out
    if "repairable" not in out:
        out["repairable_undeclared"] = True
    elif out["repairable"] == 0 and not out.get("expected"):
        out["needs_human_review"] = True
        out.setdefault("hint", check.review or "no automatic repair applies; inspect the rows listed")
        if out["severity"] == "warn":
            out["severity"] = "info"
    return out


def crashed(check: Check, err: BaseException) -> Issue:
    """The issue reported for a check that raised."""
    return {"type": "check_crashed", "severity": "warn", "check_name": check.name,
            "detail": f"{type(err).__name__}: {err}"}


def sample(ids: list[int]) -> list[int]:
    return ids[:SAMPLE]


def row_issue(rows: list[tuple[int, bool]], **extra: Any) -> list[Issue]:
    """The issue of a row defect from (id, locked) of the defective rows: `count`,
    `locked` (never repaired), `repairable`, sample `ids` — or no issue for no rows."""
    if not rows:
        return []
    locked = sum(1 for _, is_locked in rows if is_locked)
    return [{"count": len(rows), "locked": locked, "repairable": len(rows) - locked,
             "ids": sample([row_id for row_id, _ in rows]), **extra}]
