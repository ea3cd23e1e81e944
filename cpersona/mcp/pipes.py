"""stdin and stdout of the stdio transport as asyncio pipes: no thread hand-off per message.

The SDK's stdio transport reads stdin and writes stdout through anyio's file wrapper, which
runs every readline, write and flush in a worker thread: three thread hand-offs per request,
each waking a thread that must then take the GIL from the recall's own threads. Here the event
loop reads and writes the pipes itself (asyncio's pipe transports: non-blocking descriptors
watched by its selector). Measured paired over MCP (`latency_pair.py`):
benchmarks/rounds/2026-12-02-round-12-stdio-pipes.md. Writes
keep asyncio's flow control: a client that stops reading holds the writer at the transport's
high-water mark, as a blocked write held the writing thread before.

Only pipes are served this way (stdin and stdout both FIFOs, as a host that spawns the server
with pipes gives them); sockets — what Node's child processes get —, files and terminals, and
stdout and stderr being one file (a non-blocking wire would make stderr non-blocking too), get
the same claim over threads (`ThreadedWire`: anyio's file wrappers, as the SDK's streams). The
wire is claimed as the SDK claims it: stdout's descriptor is duplicated for the wire and fd 1
pointed at stderr while serving, so a stray print of a handler or the output of a child
process never reaches the protocol. At the end of stdin the requests still running are waited
for (`InFlight`, up to EOF_WAIT_S) so each gets its answer: the SDK cancels what runs when its
input ends. Both descriptors are restored at the end, in blocking mode, also after a signal
(`release_all`), for whatever reads or writes them next. `open_wire` yields None — the SDK's
own streams — only without descriptors or on Windows.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import BinaryIO

import anyio

log = logging.getLogger(__name__)

#: Bytes asked of the stdin pipe per read (a longer line arrives in several reads).
READ_CHUNK = 1 << 16
#: Seconds the end of stdin waits for the requests still being answered (`InFlight`).
EOF_WAIT_S = 60.0
#: The id of a JSON-RPC response as the SDK writes it (`{"jsonrpc":"2.0","id":…,"result"|"error"`).
_RESPONSE_ID = re.compile(r'\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*+"),"(?:result|error)"')


class InFlight:
    """The requests read from stdin that have no answer on stdout yet. At the end of stdin the
    reader waits for them (`drained`) before it ends the session: the SDK cancels whatever is
    still running when its input ends, so a client that sends its last requests and closes
    stdin (a pipeline, `printf … | cpersona`) would get no answer to them — while a store among
    them may already be written."""

    def __init__(self) -> None:
        self._open: dict[object, int] = {}
        self._changed = asyncio.Event()

    def sent(self, request_id: object) -> None:
        """A request with this id was handed to the SDK."""
        if request_id is not None:
            self._open[request_id] = self._open.get(request_id, 0) + 1

    def notified(self, text: str) -> None:
        """A notification was handed to the SDK: a cancelled request gets no answer (MCP's
        `notifications/cancelled`), so it is no longer waited for."""
        if self._open and '"notifications/cancelled"' in text:
            params = json.loads(text).get("params") or {}
            self._open.pop(params.get("requestId"), None)
            self._changed.set()

    def written(self, text: str) -> None:
        """A message went out on stdout: if it answers a request, that one is done."""
        match = _RESPONSE_ID.match(text, 0, 512) if self._open else None
        if match is None:
            return
        key = json.loads(match.group(1))
        left = self._open.get(key, 0) - 1
        if left > 0:
            self._open[key] = left
        else:
            self._open.pop(key, None)
        self._changed.set()

    async def drained(self, timeout_s: float = EOF_WAIT_S) -> bool:
        """Wait until every request read has been answered (at most `timeout_s`); whether it was."""
        with anyio.move_on_after(timeout_s):
            while self._open:
                self._changed.clear()
                await self._changed.wait()
        return not self._open


class Wire:
    """The claimed stdin/stdout: `lines()` for the reader, `write`/`flush` for the SDK's writer
    (the two methods its stdout stream is used through)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.inflight = InFlight()

    async def lines(self) -> AsyncIterator[bytes]:
        """Each line of stdin with its newline (the last one without, if the input ends in the
        middle of a line); ends at end of input. A line may be of any length."""
        pending = bytearray()
        while chunk := await self._reader.read(READ_CHUNK):
            searched = len(pending)
            pending += chunk
            start = 0
            while (end := pending.find(b"\n", searched)) != -1:
                yield bytes(pending[start:end + 1])
                start = searched = end + 1
            del pending[:start]
        if pending:
            yield bytes(pending)

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))
        self.inflight.written(text)

    async def flush(self) -> None:
        """Wait while the client has not read what was written (flow control). Raises
        BrokenPipeError once the client closed its end (asyncio reports it as a lost connection)."""
        try:
            await self._writer.drain()
        except ConnectionError as err:
            raise BrokenPipeError(f"the client closed stdout: {err}") from err


def _separate(fd_out: int, fd_err: int) -> bool:
    """Whether stdout and stderr are different files (not one pipe or file opened twice)."""
    try:
        out, err = os.fstat(fd_out), os.fstat(fd_err)
    except OSError:
        return False
    return (out.st_dev, out.st_ino) != (err.st_dev, err.st_ino)


def _fifo(fd: int) -> bool:
    """Whether `fd` is a pipe (FIFO). Sockets are left to the SDK's streams: asyncio's write-pipe
    transport takes a socket that turns readable (its peer shut down its own sending side, or
    stdin and stdout are one socket) for a closed connection."""
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


#: Releases of the wires claimed now, for a signal handler that ends the process at once.
_CLAIMED: list[Callable[[], None]] = []


def release_all() -> None:
    """Put stdin and stdout back as they were (fd 1 on the wire, blocking mode) — for a stop
    that exits without unwinding (`os._exit`), so the host's descriptors are left usable."""
    for release in list(_CLAIMED):
        release()


class ThreadedWire:
    """stdin and stdout through anyio's file wrappers — a worker thread per read, write and
    flush, as the SDK's own streams — for what is not a pipe (sockets, files, terminals), with
    the same claim of fd 1 and the same wait for the requests in flight at the end of input."""

    def __init__(self, fd_in: int, fd_out: int) -> None:
        # the input duplicate is never closed: a worker thread may still be blocked reading it
        self._in = anyio.wrap_file(os.fdopen(os.dup(fd_in), "rb"))
        self._out = anyio.wrap_file(os.fdopen(os.dup(fd_out), "wb"))
        self.inflight = InFlight()

    async def lines(self) -> AsyncIterator[bytes]:
        """Each line of stdin (readline's split), until the end of input."""
        async for line in self._in:
            yield line

    async def write(self, text: str) -> None:
        await self._out.write(text.encode("utf-8"))
        self.inflight.written(text)

    async def flush(self) -> None:
        await self._out.flush()


@asynccontextmanager
async def open_wire(stdin: BinaryIO, stdout: BinaryIO) -> AsyncIterator[Wire | ThreadedWire | None]:
    """Claim stdin and stdout for the duration (module doc): asyncio pipes when both are pipes,
    else the threaded wire; None — the SDK's own streams — without descriptors or on Windows."""
    try:
        fd_in, fd_out, fd_err = stdin.fileno(), stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        yield None
        return
    if sys.platform == "win32":
        yield None
        return
    kept_out = os.dup(fd_out)  # fd 1's wire, to put back at the end (a transport closes its own)
    piped = await _pipes(fd_in, fd_out) if _fifo(fd_in) and _fifo(fd_out) and _separate(fd_out, fd_err) else None
    wire = piped[0] if piped is not None else ThreadedWire(fd_in, fd_out)
    os.dup2(fd_err, fd_out)  # stray output while serving goes to stderr, never onto the wire
    done: list[bool] = []

    def release() -> None:
        if not done:
            done.append(True)
            _put_back(kept_out, fd_out, fd_in)

    _CLAIMED.append(release)
    try:
        yield wire
    finally:
        for transport in piped[1] if piped is not None else ():
            transport.close()
        release()
        _CLAIMED.remove(release)


async def _pipes(fd_in: int, fd_out: int) -> tuple[Wire, tuple[asyncio.BaseTransport, ...]] | None:
    """The asyncio pipe wire over duplicates of both descriptors and its two transports; None
    when asyncio cannot watch them."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    try:
        reading, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                  os.fdopen(os.dup(fd_in), "rb", buffering=0))
    except (OSError, ValueError, NotImplementedError) as err:
        log.debug("stdin on an asyncio pipe unavailable (%s): threads serve", err)
        return None
    try:
        writing, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                          os.fdopen(os.dup(fd_out), "wb", buffering=0))
    except (OSError, ValueError, NotImplementedError) as err:
        log.debug("stdout on an asyncio pipe unavailable (%s): threads serve", err)
        reading.close()
        return None
    writing.set_write_buffer_limits(high=0)  # a flush returns once the pipe took everything
    return Wire(reader, asyncio.StreamWriter(writing, protocol, None, loop)), (reading, writing)


def _put_back(kept_out: int, fd_out: int, fd_in: int) -> None:
    """fd 1 on the wire again, both descriptors' files in blocking mode again (the pipe
    transports made them non-blocking), the kept duplicate closed. Never raises: a
    descriptor the host closed meanwhile has nothing to restore."""
    steps: list[tuple[Callable[[], object], str]] = [
        (lambda: os.dup2(kept_out, fd_out), "stdout back on the wire"),
        (lambda: os.set_blocking(kept_out, True), "stdout blocking"),
        (lambda: os.set_blocking(fd_in, True), "stdin blocking"),
        (lambda: os.close(kept_out), "close"),
    ]
    for step, what in steps:
        try:
            step()
        except OSError as err:
            log.debug("after serving, %s: %s", what, err)
