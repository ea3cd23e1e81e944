"""What the task queue needs of its collaborators, as Protocols: the embedding gateway
(`embedding.gateway.EmbeddingGateway`) and the resident index (`index.resident`)."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from cpersona.embedding.base import Embedder
from cpersona.jobs.reembed import Vectors
from cpersona.storage.records import RowRef


class Embeddings(Vectors, Protocol):
    """What the queue needs of the embedding side (`embedding.gateway.EmbeddingGateway`):
    what the background re-embedding needs (`jobs/reembed.py: Vectors`), and the backend."""

    embedder: Embedder | None

    def not_answering(self, limit_s: float) -> tuple[float, float] | None:
        """(seconds waited, seconds allowed) of a batch in flight past `limit_s`, else None."""


class IndexWriter(Protocol):
    """Where a freshly written vector goes after COMMIT (`index.resident.ResidentIndexes`)."""

    def add(self, table: str, ref: RowRef, vec: np.ndarray) -> None:
        """Put the vector of `ref` into the resident index."""
