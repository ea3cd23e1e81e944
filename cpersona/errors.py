"""Every exception cpersona raises on purpose, under one base class `CPersonaError`.

The edges (MCP tools, CLI) turn them into answers: `InvalidArgument` and `Refused` become
`{ok: false, error}`, `ConfigError` / `StorageError` stop the process with one line on
stderr, `StorageUnavailable` (busy, disk full, I/O error, corrupt file) answers the one call
with `{ok: false, error, error_kind, retry_after_ms?}` and the server keeps running,
`EmbeddingError` degrades recall to keyword search and is reported in the advisory,
`UpdateCheckError` is one quiet log line (the update check is advisory, never fatal).
Anything else reaching an edge is a bug: it is logged with its traceback and answered as an
internal error, never swallowed.
"""

from __future__ import annotations


class CPersonaError(Exception):
    """Base class of every deliberate cpersona error."""


class InvalidArgument(CPersonaError, ValueError):
    """An argument breaks a rule. `argument` names it (dotted for nested keys)."""

    def __init__(self, argument: str, rule: str) -> None:
        super().__init__(f"{argument}: {rule}")
        self.argument = argument
        self.rule = rule


class Refused(CPersonaError):
    """A row cannot be changed (absent, locked, another agent's, content collision).
    `str(err)` is the human-readable reason returned as `{ok: false, error}`."""


class ConfigError(CPersonaError, ValueError):
    """A CPERSONA_* variable or a configuration file is unusable. `str(err)` is one line
    fit for users, naming the variable and the expected form."""


class StorageError(CPersonaError, RuntimeError):
    """The database file cannot be opened or used (not SQLite, unreadable, locked away)."""


class StorageUnavailable(StorageError):
    """The database cannot serve this call now; nothing of the call was written.

    `kind` names the condition for callers (the `error_kind` of an answer): "busy" (another
    connection held the write lock past the busy timeout), "disk_full" (no space, or the
    file reached a size limit), "io_error", "read_only", "corrupt", "out_of_memory".
    `retry_after_ms` is set when the same call can succeed later without anyone acting
    (busy); None when a person must act first (free space, restore a backup).
    """

    def __init__(self, message: str, kind: str, retry_after_ms: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after_ms = retry_after_ms

    def fields(self) -> dict[str, object]:
        """The keys an answer carries besides `error`: error_kind, retryable, retry_after_ms."""
        out: dict[str, object] = {"error_kind": self.kind, "retryable": self.retry_after_ms is not None}
        if self.retry_after_ms is not None:
            out["retry_after_ms"] = self.retry_after_ms
        return out


class DatabaseDamaged(StorageUnavailable):
    """The database file is damaged: a corrupt page, or not a SQLite database at all
    (`kind` "corrupt")."""


class DatabaseBusy(StorageUnavailable):
    """Another connection (usually another process) kept the write lock past the busy
    timeout (`kind` "busy")."""


class StatementTimeout(StorageError):
    """A statement was stopped at its time limit (one that holds the write lock while it
    runs, stopped so that other writers do not wait past their busy timeout)."""


class SchemaTooNew(StorageError):
    """The database was written by a newer cpersona; opening it would risk the data."""


class ContextError(CPersonaError, ValueError):
    """The operating-context file is unusable; `str(err)` names the file, key and rule."""


class EmbeddingError(CPersonaError, RuntimeError):
    """An embedding backend could not produce vectors (unreachable, bad answer, model missing)."""


class EmbeddingNotReady(EmbeddingError):
    """The backend exists but is still loading (in-process model warming up)."""


class UpdateCheckError(CPersonaError, RuntimeError):
    """The package index could not be read or its answer is unusable (offline, non-2xx,
    malformed, or about another project). Never cached: the next start tries again."""
