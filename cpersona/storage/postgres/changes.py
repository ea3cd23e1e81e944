"""The change feed of one node: a LISTEN connection that collects what OTHER nodes committed
(triggers.py writes the notifications), so the resident vector index of this node can
apply exactly those rows instead of reloading everything.

`version` counts foreign changes (it plays the part of SQLite's `PRAGMA data_version`);
`since(v)` lists the rows changed after version `v`, or None when that cannot be known —
the log was truncated, a statement changed too many rows, the stored vectors' model
changed, or the connection dropped (notifications sent while it was down are lost, so the
receiver must reload). Delivery: PostgreSQL sends a notification when the writing
transaction commits; the listener thread blocks on the socket, so a change is here within
the network round trip (benchmarks/latency.py measures the store → visible delay).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

import psycopg

from cpersona.storage.ports import Change

log = logging.getLogger(__name__)

#: Changes kept for readers that have not caught up; older readers reload.
LOG_MAX = 10_000
#: Seconds between reconnection attempts after the LISTEN connection dropped.
RECONNECT_DELAY = 1.0
#: Seconds one wait for notifications lasts before the stop flag is checked again.
POLL = 0.5
#: Keys of cpersona_meta whose change invalidates every stored vector's meaning.
_RELOADING_KEYS = {"vectors"}



class ChangeFeed:
    """LISTEN on `channel` in a daemon thread; skips notifications written by `node`.

    Args:
        conninfo: libpq connection string of the database.
        channel: the notification channel (`cpersona.<schema>`).
        node: this node's id (its own changes are skipped).
        connect_kwargs: passed to `psycopg.connect` (search_path options etc.).

    Raises psycopg.Error when the first connection cannot be made (the caller reports it).
    """

    def __init__(self, conninfo: str, channel: str, node: str, connect_kwargs: dict | None = None) -> None:
        self.conninfo = conninfo
        self.channel = channel
        self.node = node
        self.kwargs = dict(connect_kwargs or {})
        self.version = 0
        self.on_tasks: Callable[[], None] | None = None
        self.connected = False
        self.last_error = ""
        self._log: deque[tuple[int, Change]] = deque(maxlen=LOG_MAX)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conn: psycopg.Connection | None = self._connect()
        self._thread = threading.Thread(target=self._run, name="cpersona-change-feed", daemon=True)
        self._thread.start()

    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(self.conninfo, autocommit=True, **self.kwargs)
        conn.execute(f'LISTEN "{self.channel.replace(chr(34), chr(34) * 2)}"')
        self.connected = True
        return conn

    # ------------------------------------------------------------ reading
    def since(self, version: int) -> list[Change] | None:
        """Changes after `version` (as read from `self.version`), or None: reload."""
        with self._lock:
            if version == self.version:
                return []
            newer = [c for v, c in self._log if v > version]
            oldest = self._log[0][0] if self._log else self.version + 1
        if oldest > version + 1 or any(c is None for c in newer):
            return None
        return newer

    # ------------------------------------------------------------ writing
    def _record(self, change: Change) -> None:
        with self._lock:
            self.version += 1
            self._log.append((self.version, change))

    def handle(self, payload: str) -> None:
        """Apply one notification payload (`node|kind|body`, see triggers.py)."""
        node, _, rest = payload.partition("|")
        kind, _, body = rest.partition("|")
        if node == self.node:
            return
        if kind == "tasks":
            if self.on_tasks is not None:
                self.on_tasks()
            return
        if kind == "meta":
            reload = bool(_RELOADING_KEYS & set(body.split(",")))
            self._record(None if reload else ("meta", []))
            return
        if body == "*":
            self._record(None)
            return
        try:
            ids = [int(x) for x in body.split(",") if x]
        except ValueError:
            log.warning("change feed: unreadable notification %r; reloading", payload[:200])
            self._record(None)
            return
        self._record((kind, ids))

    def _safely(self, payload: str) -> None:
        """`handle`, but a failure is logged and answered by a reload, never kills the thread."""
        try:
            self.handle(payload)
        except Exception:  # logged; the receivers reload instead of missing the change
            log.exception("change feed: could not apply %r; reloading", payload[:200])
            self._record(None)

    # ------------------------------------------------------------- thread
    def _run(self) -> None:
        while not self._stop.is_set():
            conn = self._conn
            try:
                if conn is None:
                    conn = self._conn = self._connect()
                    self._record(None)  # notifications sent while disconnected are lost
                    log.info("change feed: reconnected to %s", self.channel)
                for note in conn.notifies(timeout=POLL):
                    self._safely(note.payload)
            except psycopg.Error as err:
                if self._stop.is_set():
                    break
                self.connected = False
                self.last_error = f"{type(err).__name__}: {err}"
                log.warning("change feed: connection lost (%s); reconnecting", err)
                self._close_conn()
                self._stop.wait(RECONNECT_DELAY)

    def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def close(self) -> None:
        """Stop the thread and close the connection. Idempotent."""
        self._stop.set()
        self._thread.join(POLL * 4)
        self._close_conn()
