"""The embedding worker process: one bundled model behind a pipe (`worker_frames.py`).

Started by `worker_client.ModelWorker` as ``python -P -m cpersona.embedding.worker MODEL THREADS
SERVER_PID``.
Why a process: the bundled USE model runs ~40 small numpy steps per text, each taking
Python's GIL back, so in a thread of the server it mostly takes turns with the recall's
keyword search instead of running beside it (a query embedding took about twice as long
beside the recall's Python as alone; measured:
benchmarks/rounds/2026-12-01-round-10-embedding-worker.md). In its own process it runs on the
other core.

The pipe is the worker's stdout, so nothing else may write there: file descriptor 1 is
pointed at stderr before the model is imported and frames go to a private copy of it.
Ctrl-C in a terminal reaches the whole process group; the worker ignores SIGINT and ends
when the server does (end of stdin, or its parent pid changing while it is busy on a batch),
so it never outlives it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import IO

from cpersona.embedding import worker_frames as frames

#: Seconds between two looks at whether the server is still this worker's parent.
PARENT_CHECK_S = 1.0


def _private_stdout() -> IO[bytes]:
    """A binary stream on a copy of fd 1; fd 1 itself then writes to stderr."""
    frames_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(frames_fd, "wb", buffering=1 << 16)


def serve(name: str, threads: int, source: IO[bytes], sink: IO[bytes]) -> int:
    """Load model `name` and answer texts frames until `source` ends. Returns the exit code:
    0 at end of input, 1 when the model failed to load (after an ``F`` frame)."""
    from cpersona.embedding import models

    try:
        encode = models.model_spec(name).load(threads)
    except Exception as exc:  # noqa: BLE001 — every load failure goes back to the server as F
        frames.write_frame(sink, frames.FATAL, f"{type(exc).__name__}: {exc}".encode())
        return 1
    frames.write_frame(sink, frames.READY, b'{"dim": %d}' % models.model_spec(name).dim)
    while True:
        try:
            kind, payload = frames.read_frame(source)
        except frames.FrameError:
            return 0  # the server closed the pipe (or exited)
        try:
            if kind != frames.TEXTS:
                raise frames.FrameError(f"unexpected frame kind {kind!r}")
            answer = frames.VECTORS, frames.vectors_payload(encode(frames.read_texts(payload)))
        except Exception as exc:  # noqa: BLE001 — the server raises it as EmbeddingError for this batch
            answer = frames.ERROR, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")
        frames.write_frame(sink, *answer)


def _die_with(parent: int) -> None:
    """End this process once the server that started it is gone (checked every
    PARENT_CHECK_S by a daemon thread), so a worker busy on a long batch, which would read
    the end of its pipe only after the batch, does not outlive a killed server. (Linux's
    parent-death signal would not do: it fires when the server's *thread* that started the
    worker ends, and that is the model loader, done within seconds.)"""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)

    threading.Thread(target=watch, name="cpersona-worker-parent", daemon=True).start()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    name, threads = argv[0], int(argv[1])
    if len(argv) > 2:
        _die_with(int(argv[2]))
    sink = _private_stdout()
    try:
        return serve(name, threads, sys.stdin.buffer, sink)
    except (BrokenPipeError, ConnectionResetError):
        return 0  # the server went away mid-answer


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
