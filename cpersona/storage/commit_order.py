"""Commit order for both backends: after-commit callbacks run in the order transactions commit.

`CommitOrdered` is mixed into every database class. A backend's `write()` wraps its own
transaction in `_ordered(...)`; callbacks registered with `session.after(fn)` then run after
COMMIT and before this process's next writer commits, so in-memory mirrors of the data (the
resident vector index) see writes in commit order. Nothing registered runs on rollback.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from cpersona.storage.failures import Conditions


class AfterCommitHooks:
    """The session half: `after(fn)` registers, `pending_after()` hands them to `_ordered`."""

    def __init__(self) -> None:
        self._after: list[Callable[[], None]] = []

    def after(self, change: Callable[[], None]) -> None:
        """Run `change` after COMMIT, before the next writer of this process commits."""
        self._after.append(change)

    def pending_after(self) -> list[Callable[[], None]]:
        return self._after


class CommitOrdered:
    """The commit-order lock, `_ordered(transaction)` and `commits_settled()`."""

    conditions: Conditions

    def _init_commit_order(self) -> None:
        self._commit_order = threading.RLock()

    @contextmanager
    def _ordered(self, transaction: Callable[[], AbstractContextManager[Any]]) -> Iterator[Any]:
        """Run `transaction()` (a context manager yielding a session, committing on a clean
        exit) under the commit-order lock, then mark the write as succeeded and run the
        session's after-commit callbacks before the lock is released."""
        with self._commit_order:
            with transaction() as session:
                yield session
            self.conditions.write_succeeded()
            for change in session.pending_after():
                change()

    @contextmanager
    def commits_settled(self) -> Iterator[None]:
        """Hold this process's writers off: inside, every transaction it committed has run
        its after-commit callbacks (so in-memory mirrors agree with the stored data)."""
        with self._commit_order:
            yield
