"""The local endpoint: a running server also answers small requests of this user's other
processes — the host hooks and the CLI — on the local channel of its database
(util/local_channel.py: a unix socket, mode 0600, in a private per-user directory).

One server per database owns the endpoint: the one holding the lock file's `flock`. Another
server of the same database starts normally without it and takes it over when the owner
stops (it tries every TAKEOVER_POLL_S). A killed owner's lock is released by the system; its
socket file is then stale, and the next owner (or a client) removes it.

Each connection is one request, handled on its own thread (at most MAX_CONCURRENT at once;
further connections wait in the listen backlog), by `operations.run`: the same service
methods as the MCP tools, with their validation and the pause. No access rule applies: only
this user can reach the socket (the directory and socket modes, and on Linux the peer's uid is
checked as well) — it is the user's own channel, like the CLI. Nothing is ever printed: the
stdio server's stdout is its protocol; problems are logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cpersona.util import local_channel

log = logging.getLogger(__name__)

#: Requests answered at once; the rest wait in the listen backlog.
MAX_CONCURRENT = 4
BACKLOG = 32
#: Seconds between a non-owner's attempts to take the endpoint over.
TAKEOVER_POLL_S = 2.0
#: Seconds a connection may take to send its request.
REQUEST_TIMEOUT_S = 10.0
#: Seconds `close` waits for requests in flight (and other work `spawn`ed) to finish: the
#: engine is closed after it, and must not be closed under a running request.
CLOSE_WAIT_S = 30.0

Handler = Callable[[str, dict[str, Any]], dict[str, Any]]


class LocalEndpoint:
    """The endpoint of one database in this process. `start()` claims it (or keeps trying in
    the background); `close()` releases it. `owner` says whether this process serves it now.

    Args:
        key: the database's `DbTarget.key` ('' = a database in RAM: no endpoint).
        handle: answers one request: handle(op, args) -> answer (never raises for a bad request).
    """

    def __init__(self, key: str, handle: Handler) -> None:
        self.key = key
        self.handle = handle
        self.owner = False
        self.why_not = ""
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self._listener: socket.socket | None = None
        self._lock_fd: int | None = None
        self._bound: tuple[Path, int] | None = None  # (socket path, inode) this process created
        self._thread: threading.Thread | None = None
        self._workers: set[threading.Thread] = set()
        self._workers_lock = threading.Lock()

    def start(self) -> None:
        """Claim the endpoint in a background thread (returns at once)."""
        self.why_not = local_channel.available() or ("a database in RAM has no endpoint" if not self.key else "")
        if self.why_not:
            log.info("local endpoint off: %s", self.why_not)
            return
        self._thread = threading.Thread(target=self._run, name="cpersona-local-endpoint", daemon=True)
        self._thread.start()

    def spawn(self, target: Callable[..., object], *args: object, name: str = "cpersona-local-request") -> None:
        """Run target(*args) on a daemon thread that `close` waits for (requests, warm-up)."""
        def run() -> None:
            try:
                target(*args)
            finally:
                with self._workers_lock:
                    self._workers.discard(threading.current_thread())

        thread = threading.Thread(target=run, name=name, daemon=True)
        with self._workers_lock:
            self._workers.add(thread)
        thread.start()

    def _run(self) -> None:
        try:
            folder = local_channel.runtime_dir(create=True)
            sock_path, lock_path = local_channel.paths(self.key, folder)
        except OSError as err:
            self.why_not = str(err)
            log.warning("local endpoint off: %s", err)
            return
        while not self._stop.is_set():
            if self._claim(sock_path, lock_path):
                self._serve()
                return
            self._stop.wait(TAKEOVER_POLL_S)

    def _claim(self, sock_path: Path, lock_path: Path) -> bool:
        """Take the lock and bind the socket; False when another process owns them."""
        import fcntl

        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self.why_not = "another server of this database owns the local endpoint"
            return False
        try:
            with contextlib.suppress(FileNotFoundError):
                sock_path.unlink()  # stale: its owner is gone (we hold the lock)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            old = os.umask(0o177)
            try:
                listener.bind(os.fspath(sock_path))
            finally:
                os.umask(old)
            os.chmod(sock_path, 0o600)
            listener.listen(BACKLOG)
        except OSError as err:
            os.close(fd)
            self.why_not = f"cannot listen on {sock_path}: {err}"
            log.warning("local endpoint off: %s", self.why_not)
            self._stop.set()
            return False
        self._lock_fd, self._listener = fd, listener
        self._bound = (sock_path, sock_path.stat().st_ino)
        self.owner, self.why_not = True, ""
        log.info("local endpoint at %s", sock_path)
        return True

    def _serve(self) -> None:
        listener = self._listener
        while listener is not None and not self._stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                break  # closed by close()
            self._slots.acquire()
            self.spawn(self._answer, conn)

    def _answer(self, conn: socket.socket) -> None:
        try:
            with conn:
                if not _same_user(conn):
                    return
                conn.settimeout(REQUEST_TIMEOUT_S)
                try:
                    request = local_channel.read_frame(conn)
                except (OSError, TimeoutError) as err:
                    log.debug("local endpoint: unreadable request: %s", err)
                    return
                op, args = request.get("op"), request.get("args", {})
                if not isinstance(op, str) or not isinstance(args, dict):
                    answer: dict[str, Any] = {"ok": False, "error": "a request is {op: string, args: object}"}
                else:
                    answer = self.handle(op, args)
                conn.settimeout(None)
                with contextlib.suppress(OSError):
                    conn.sendall(local_channel.encode(answer))
        finally:
            self._slots.release()

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Stop answering, wait up to `wait_s` seconds for the requests in flight (and the
        warm-up), and release the endpoint (the socket file removed when it is still the one
        this process created). Idempotent."""
        self._stop.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        deadline = time.monotonic() + wait_s
        with self._workers_lock:
            workers = list(self._workers)
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join(max(0.0, deadline - time.monotonic()))
        if self._bound is not None:
            path, inode = self._bound
            with contextlib.suppress(OSError):
                if path.stat().st_ino == inode:
                    path.unlink()
            self._bound = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=TAKEOVER_POLL_S + 1)
        self.owner = False


def _same_user(conn: socket.socket) -> bool:
    """On Linux: the peer runs as this user (SO_PEERCRED); elsewhere the socket's and its
    directory's modes are the check."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    creds = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.geteuid():
        log.warning("local endpoint: refused a connection of uid %d", uid)
        return False
    return True
