"""Is the file at the database path still the file the connections have open?

Deleting a database file (or moving another file over it) while a connection is open does
not stop SQLite: it goes on reading and writing the unlinked file, and everything written
after that is gone when the process exits (https://www.sqlite.org/howtocorrupt.html, "Unlinking
or renaming a database file while in use"). `FileIdentity.check()` compares the path's
(device, inode) with the one seen at open — one stat() call — and raises the named
condition `file_gone` instead, so no write is acknowledged into a file nobody will see.
Putting the file back makes the check pass again.
"""

from __future__ import annotations

import os

from cpersona.storage.failures import FILE_GONE, Conditions


class FileIdentity:
    """The (device, inode) of `path` when it was opened; `check()` before a commit or a read."""

    def __init__(self, path: str, conditions: Conditions) -> None:
        self.path = path
        self.conditions = conditions
        self.opened: tuple[int, int] | None = None
        self.remember()

    def remember(self) -> None:
        """Take the file now at the path as the one opened (call once SQLite created it)."""
        self.opened = self._now()

    def _now(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:  # cannot look (a folder without search permission): assume unchanged
            return self.opened
        return st.st_dev, st.st_ino

    def check(self) -> None:
        """Raise StorageUnavailable (kind "file_gone", logged once per state change) when
        the file at the path is not the one opened."""
        if (now := self._now()) != self.opened:
            detail = "no file at the path" if now is None else "another file is at the path"
            raise self.conditions.named(FILE_GONE, detail)
