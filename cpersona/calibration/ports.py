"""The narrow collaborators calibration needs from the layers around it (typed as
Protocols, so calibration never sees the engine and tests can hand in stand-ins)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

import numpy as np

from cpersona.index.vector_index import VectorIndex
from cpersona.storage.meta import VectorState

#: The resident indexes ({"memories": …, "episodes": …}), or None when unavailable.
IndexSource = Callable[[], "dict[str, VectorIndex] | None"]


class VectorSpace(Protocol):
    """The embedding side: which model makes the vectors, and a way to wake it."""

    @property
    def dim(self) -> int | None:
        """The backend's dimension (None without a backend or before its first answer)."""

    @property
    def model_id(self) -> str | None:
        """The backend's model identity (None without a backend)."""

    def current_state(self) -> VectorState | None:
        """The identity recorded for the stored vectors, as this process decided it."""

    def embed_texts(self, texts: list[str]) -> np.ndarray | None:
        """Vectors for `texts`, or None when the backend cannot answer now."""


class IndexAccess(Protocol):
    """The resident vector indexes and the lock that keeps them still during a ranking."""

    lock: threading.RLock

    def current(self) -> dict[str, VectorIndex] | None:
        """The indexes of the active model (loaded on demand), or None."""
