"""stdin and stdout of the stdio transport as asyncio pipes: no thread hand-off per message.

The SDK's stdio transport reads stdin and writes stdout through anyio's file wrapper, which
runs every readline, write and flush in a worker thread: three thread hand-offs per request,
each waking a thread that must then take the GIL from the recall's own threads. Here the event
loop reads and writes the pipes itself (asyncio's pipe transports: non-blocking descriptors
watched by its selector). Paired over MCP at 10k rows with the bundled model, both servers
running at once and each query sent to both: recall p50 −0.9 ms (benchmarks/README.md).
Writes keep asyncio's flow control: a client that stops reading holds the writer at the
transport's high-water mark, as a blocked write held the writing thread before.

The wire is claimed as the SDK claims it: stdout's descriptor is duplicated for the wire and
fd 1 pointed at stderr while serving, so a stray print of a handler or the output of a child
process never reaches the protocol; both descriptors are restored on exit. `open_wire` yields
None — and the SDK's own threaded streams serve — where a descriptor is not a pipe, socket or
character device (stdin redirected from a file), where stdout and stderr are one file (making
the wire non-blocking would make stderr non-blocking too), or without asyncio's Unix pipes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import BinaryIO

log = logging.getLogger(__name__)

#: Bytes asked of the stdin pipe per read (a longer line arrives in several reads).
READ_CHUNK = 1 << 16


class Wire:
    """The claimed stdin/stdout: `lines()` for the reader, `write`/`flush` for the SDK's writer
    (the two methods its stdout stream is used through)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

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

    async def flush(self) -> None:
        """Wait while the client has not read what was written (flow control); raises the
        pipe's error (BrokenPipeError once the client closed it)."""
        await self._writer.drain()


def _separate(fd_out: int, fd_err: int) -> bool:
    """Whether stdout and stderr are different files (not one pipe or file opened twice)."""
    try:
        out, err = os.fstat(fd_out), os.fstat(fd_err)
    except OSError:
        return False
    return (out.st_dev, out.st_ino) != (err.st_dev, err.st_ino)


@asynccontextmanager
async def open_wire(stdin: BinaryIO, stdout: BinaryIO) -> AsyncIterator[Wire | None]:
    """Claim stdin and stdout as asyncio pipes for the duration (module doc); None when they
    cannot be (the caller then uses the SDK's threaded streams)."""
    try:
        fd_in, fd_out, fd_err = stdin.fileno(), stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        yield None
        return
    if sys.platform == "win32" or not _separate(fd_out, fd_err):
        yield None
        return
    loop = asyncio.get_running_loop()
    wire_in = os.fdopen(os.dup(fd_in), "rb", buffering=0)
    wire_out = os.fdopen(os.dup(fd_out), "wb", buffering=0)
    reader = asyncio.StreamReader()
    try:
        reading, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), wire_in)
    except (OSError, ValueError, NotImplementedError) as err:  # not a pipe, socket or character device
        _unused(err, (wire_in, fd_in), (wire_out, fd_out))
        yield None
        return
    try:
        writing, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, wire_out)
    except (OSError, ValueError, NotImplementedError) as err:
        reading.close()
        _unused(err, (wire_out, fd_out))
        os.set_blocking(fd_in, True)
        yield None
        return
    writing.set_write_buffer_limits(high=0)  # a flush returns once the pipe took everything
    writer = asyncio.StreamWriter(writing, protocol, None, loop)
    os.dup2(fd_err, fd_out)  # stray output while serving goes to stderr, never onto the wire
    try:
        yield Wire(reader, writer)
    finally:
        reading.close()
        _restore(wire_out.fileno(), fd_out)
        writing.close()
        for fd in (fd_in, fd_out):
            _blocking(fd)


def _unused(err: Exception, *ends: tuple[BinaryIO, int]) -> None:
    """Close duplicates that serve no pipe (and give their descriptors back blocking mode)."""
    log.debug("stdio on asyncio pipes unavailable (%s): the SDK's streams serve", err)
    for end, fd in ends:
        end.close()
        _blocking(fd)


def _restore(wire: int, fd_out: int) -> None:
    """Point fd 1 back at the wire."""
    try:
        os.dup2(wire, fd_out)
    except OSError as err:
        log.warning("could not put stdout back after serving: %s", err)


def _blocking(fd: int) -> None:
    """Blocking mode again (a pipe transport made the descriptor's file non-blocking)."""
    try:
        os.set_blocking(fd, True)
    except OSError as err:  # closed meanwhile: nothing to restore
        log.debug("descriptor %d not restored to blocking mode: %s", fd, err)
