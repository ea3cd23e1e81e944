"""The pipe protocol between the server and its embedding worker process (`worker.py`).

Every message is one frame: a kind byte, a little-endian uint32 payload length, the payload.

Server → worker:
    ``T`` texts to embed: JSON array of strings (ASCII: lone surrogates travel as escapes).
Worker → server:
    ``R`` ready: the model loaded (payload: JSON ``{"dim": int}``);
    ``V`` vectors: uint32 rows, uint32 dim, then rows × dim float32 (little-endian);
    ``E`` the model raised on this batch (payload: UTF-8 message); the worker keeps serving;
    ``F`` the model failed to load (payload: UTF-8 message); the worker then exits.
"""

from __future__ import annotations

import json
import struct
from typing import IO

import numpy as np

TEXTS, READY, VECTORS, ERROR, FATAL = b"T", b"R", b"V", b"E", b"F"
_HEADER = struct.Struct("<cI")
_SHAPE = struct.Struct("<II")


class FrameError(EOFError):
    """The pipe ended (the other side exited) or carried something that is not a frame."""


def write_frame(stream: IO[bytes], kind: bytes, payload: bytes) -> None:
    """Write one frame and flush. Raises OSError (BrokenPipeError) when the reader is gone."""
    stream.write(_HEADER.pack(kind, len(payload)) + payload)
    stream.flush()


def read_frame(stream: IO[bytes]) -> tuple[bytes, bytes]:
    """(kind, payload) of the next frame. Raises FrameError at end of stream or on a short frame."""
    kind, size = _HEADER.unpack(_exactly(stream, _HEADER.size))
    return kind, _exactly(stream, size)


def _exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size) if size else b""
    if len(data) != size:
        raise FrameError(f"pipe ended after {len(data)} of {size} bytes")
    return data


def texts_payload(texts: list[str]) -> bytes:
    return json.dumps(texts).encode("ascii")


def read_texts(payload: bytes) -> list[str]:
    texts = json.loads(payload)
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise FrameError("a texts frame must hold a JSON array of strings")
    return texts


def vectors_payload(vectors: np.ndarray) -> bytes:
    rows = np.ascontiguousarray(vectors, dtype="<f4")
    if rows.ndim != 2:
        raise ValueError(f"the model returned shape {rows.shape}, not (rows, dim)")
    return _SHAPE.pack(*rows.shape) + rows.tobytes()


def read_vectors(payload: bytes) -> np.ndarray:
    rows, dim = _SHAPE.unpack_from(payload)
    body = memoryview(payload)[_SHAPE.size:]
    if len(body) != rows * dim * 4:
        raise FrameError(f"a vectors frame of {rows}×{dim} carried {len(body)} bytes")
    return np.frombuffer(body, dtype="<f4").reshape(rows, dim).astype(np.float32)
