"""What the task queue needs of its collaborators, as Protocols: the embedding gateway
(`embedding.gateway.EmbeddingGateway`) and the resident index (`index.resident`)."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from cpersona.embedding.base import Embedder
from cpersona.storage import Session
from cpersona.storage.records import RowRef


class Embeddings(Protocol):
    """What the queue needs of the embedding side (`embedding.gateway.EmbeddingGateway`)."""

    embedder: Embedder | None

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Vectors, or raise EmbeddingNotReady / EmbeddingError."""

    def vector_for_write(self, session: Session, vec: np.ndarray | None) -> np.ndarray | None:
        """`vec` if the database still records this backend's model, else None."""


class IndexWriter(Protocol):
    """Where a freshly written vector goes after COMMIT (`index.resident.ResidentIndexes`)."""

    def add(self, table: str, ref: RowRef, vec: np.ndarray) -> None:
        """Put the vector of `ref` into the resident index."""
