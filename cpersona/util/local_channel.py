"""The local channel: how a process of this user reaches the cpersona server already
running for a database (host/endpoint.py serves it) — in the standard library plus
`platformdirs`, so the hook client starts in milliseconds.

Where: a unix socket `<runtime dir>/<digest>.sock`, the digest naming the database (the
SHA-256 of `places.DbTarget.key`: the resolved file path, or the URL), in the per-user runtime
directory (platformdirs: $XDG_RUNTIME_DIR/cpersona on Linux). The directory must be a real
directory owned by this user with no access for anyone else (created mode 0700; any other
state refuses the channel); the socket is created mode 0600. A lock file beside it
(`<digest>.lock`, held with `flock` by the serving process for as long as it runs) says whether
a server owns the name: a socket whose lock is free is stale (its server was killed) and is
removed by whoever finds it. Not on Windows (no unix sockets there in the standard library):
`available()` says why.

The wire: one request per connection, each way one JSON object in UTF-8 ended by a newline,
at most MAX_FRAME bytes. A request is {"op": name, "args": {...}}; an answer is the
operation's JSON object ({ok: false, error} for a failure).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import socket
import stat
import warnings
from pathlib import Path

import platformdirs

from cpersona.util.places import APP_NAME

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook client starts lean)
if TYPE_CHECKING:
    from typing import Any

#: Largest frame either way, in bytes.
MAX_FRAME = 32 * 1024 * 1024
#: Seconds a client waits to connect (a listening socket accepts at once; longer = not served).
CONNECT_TIMEOUT_S = 0.5
#: Longest socket path the platforms accept (sun_path: 108 bytes on Linux, 104 on macOS).
MAX_SOCKET_PATH = 100


class ChannelUnavailable(OSError):
    """No local channel here: the platform has none, or the runtime directory is unsafe."""


class ChannelError(OSError):
    """A server took the request but the exchange failed (timeout, closed, malformed answer)."""


def available() -> str:
    """'' when this platform has the channel, else why not."""
    if os.name != "posix" or not hasattr(socket, "AF_UNIX"):
        return "the local endpoint needs unix sockets (not available on this platform)"
    return ""


def runtime_dir(create: bool = True) -> Path:
    """The private per-user directory of the channel (created mode 0700 when `create`).
    Raises ChannelUnavailable when the platform has no channel or the directory is not a
    directory owned by this user and closed to others (a symlink, another owner, group or
    other permissions) — never loosened or taken over."""
    why = available()
    if why:
        raise ChannelUnavailable(why)
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset (it falls back to /tmp)
        warnings.simplefilter("ignore")
        folder = Path(platformdirs.user_runtime_dir(APP_NAME, appauthor=False))
    if create:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
    try:
        info = folder.lstat()
    except FileNotFoundError:
        raise ChannelUnavailable(f"no runtime directory {folder}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise ChannelUnavailable(f"{folder} is not a directory (a symlink or a file): local endpoint off")
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ChannelUnavailable(f"{folder} is not private to this user (owner {info.st_uid}, mode "
                                 f"{stat.S_IMODE(info.st_mode):o}): local endpoint off")
    return folder


def paths(key: str, folder: Path) -> tuple[Path, Path]:
    """(socket, lock file) of the database named by `key` in `folder`."""
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    sock = folder / f"{digest}.sock"
    if len(os.fsencode(sock)) > MAX_SOCKET_PATH:
        raise ChannelUnavailable(f"socket path {sock} is longer than {MAX_SOCKET_PATH} bytes")
    return sock, folder / f"{digest}.lock"


def encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def read_frame(conn: socket.socket) -> dict[str, Any]:
    """One JSON object ended by a newline. Raises ChannelError (closed early, too large, not
    a JSON object) or TimeoutError."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            raise ChannelError("the other side closed the connection before a whole frame")
        end = chunk.find(b"\n")
        chunks.append(chunk if end < 0 else chunk[:end])
        size += len(chunk)
        if end >= 0:
            break
        if size > MAX_FRAME:
            raise ChannelError(f"frame larger than {MAX_FRAME} bytes")
    try:
        value = json.loads(b"".join(chunks))
    except (ValueError, RecursionError) as err:
        raise ChannelError(f"malformed frame: {err}") from None
    if not isinstance(value, dict):
        raise ChannelError("a frame must be a JSON object")
    return value


def lock_is_free(lock: Path) -> bool:
    """True when no process holds the lock of `lock` (its server is gone or never ran)."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing releases a lock taken here
    return True


def remove_stale(sock: Path, lock: Path) -> bool:
    """Remove `sock` when no server holds its lock. Returns True when it was removed."""
    if not lock_is_free(lock):
        return False
    with contextlib.suppress(FileNotFoundError):
        sock.unlink()
        return True
    return False


def call(key: str, op: str, args: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """Send one request to the server of the database `key` and return its answer; None
    when no server answers for it (no socket, or a stale one, which is removed). Raises
    ChannelUnavailable (no channel here), ChannelError or TimeoutError (a server took the
    request and did not answer within `timeout` seconds)."""
    sock_path, lock = paths(key, runtime_dir(create=False))
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_TIMEOUT_S)
        try:
            conn.connect(os.fspath(sock_path))
        except (FileNotFoundError, ConnectionRefusedError):
            remove_stale(sock_path, lock)
            return None
        except OSError as err:
            if err.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK):
                return None
            raise
        conn.settimeout(timeout)
        conn.sendall(encode({"op": op, "args": args}))
        return read_frame(conn)
    finally:
        conn.close()


def ask_server(key: str, op: str, args: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """`call`, with None also when this platform or user has no channel, or the server says
    it is not ready for this request yet (`not_ready`: its model is loading) — the caller then
    answers in its own process. Raises ChannelError or TimeoutError as `call` does."""
    if not key:
        return None
    try:
        answer = call(key, op, args, timeout)
    except ChannelUnavailable:
        return None
    return None if answer is not None and answer.get("not_ready") else answer
