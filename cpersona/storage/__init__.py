"""Storage: the only layer that writes SQL or touches `sqlite3`.

`Database` owns the connections and the write lock; `Session` bundles the repositories
(one module per table or concern) bound to one connection.
"""

from cpersona.storage.db import Database
from cpersona.storage.session import Session

__all__ = ["Database", "Session"]
