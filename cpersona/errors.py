"""Every exception cpersona raises on purpose, under one base class `CPersonaError`.

The edges (MCP tools, CLI) turn them into answers: `InvalidArgument` and `Refused` become
`{ok: false, error}`, `ConfigError` / `StorageError` stop the process with one line on
stderr, `EmbeddingError` degrades recall to keyword search and is reported in the advisory.
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


class DatabaseDamaged(StorageError):
    """The database file is damaged: a corrupt page, or not a SQLite database at all."""


class DatabaseBusy(StorageError):
    """Another connection (usually another process) kept the write lock past the busy timeout."""


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
