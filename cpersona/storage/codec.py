"""Stored vectors are little-endian float32 BLOBs of 4·dim bytes (the original's format)."""

from __future__ import annotations

import numpy as np

#: How a vector is stored: little-endian float32.
BLOB_DTYPE = np.dtype("<f4")


def to_blob(vector: np.ndarray) -> bytes:
    """(dim,) float vector → 4·dim bytes, little-endian float32."""
    return np.asarray(vector, dtype=BLOB_DTYPE).tobytes()


def from_blob(blob: bytes | None) -> np.ndarray | None:
    """BLOB → (dim,) float32, or None when empty, its length is not a multiple of 4, or a
    value is not finite (a NaN would make every cosine of its agent's recalls NaN, which is
    not JSON): such a row is treated as one without a vector."""
    if not blob or len(blob) % 4:
        return None
    vec = np.frombuffer(blob, dtype=BLOB_DTYPE).astype(np.float32)
    return vec if np.isfinite(vec).all() else None
