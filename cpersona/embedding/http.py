"""HTTP embedding backend: the /embed contract of the original CPersona.

`POST <url> {"texts": [...]}` → `{"embeddings": [[...], ...], "dimensions": N, "model": id}`.
Vectors are checked for count, dimension, finiteness and unit L2 norm before use.
"""

from __future__ import annotations

import threading

import httpx2
import numpy as np

from cpersona.embedding.base import EmbeddingError, check_vectors

#: Seconds allowed to open a TCP connection; an unreachable endpoint fails fast.
CONNECT_TIMEOUT_SECS = 2.0


class HttpEmbedder:
    """Client of an /embed server.

    Args:
        url: full endpoint, e.g. "http://127.0.0.1:8401/embed".
        timeout: seconds for the whole request (CPERSONA_EMBEDDING_TIMEOUT_SECS, default 30).
        model_label: identity recorded with stored vectors when the server does not send
            `model` (CPERSONA_EMBEDDING_MODEL); "http:<url>" when empty.
    """

    mode = "http"

    def __init__(self, url: str, timeout: float = 30.0, model_label: str = "") -> None:
        self.url = url
        self.model_id = model_label or f"http:{url}"
        self._label_fixed = bool(model_label)
        self.dim: int | None = None
        self._client = httpx2.Client(timeout=httpx2.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_SECS)))
        self._lock = threading.Lock()

    def ready(self) -> bool:
        return True

    def embed(self, texts: list[str]) -> np.ndarray:
        """POST `texts` (1..100) → (len(texts), dim) float32, L2-normalised.

        Raises:
            EmbeddingError: transport failure, non-2xx status, malformed JSON, missing
                `embeddings`, or vectors failing `check_vectors` (e.g. dimension changed).
        """
        if not texts:
            raise EmbeddingError("no texts to embed")
        try:
            response = self._client.post(self.url, json={"texts": texts})
            response.raise_for_status()
            body = response.json()
        except (httpx2.HTTPError, ValueError) as err:
            raise EmbeddingError(f"POST {self.url} failed: {type(err).__name__}: {err}") from err
        if not isinstance(body, dict) or not isinstance(body.get("embeddings"), list):
            raise EmbeddingError(f"POST {self.url} answered without an 'embeddings' list")
        vectors = check_vectors(body["embeddings"], len(texts), self.dim)
        self._learn_identity(vectors.shape[1], body.get("model"))
        return vectors

    def _learn_identity(self, dim: int, model: object) -> None:
        with self._lock:
            self.dim = dim
            if not self._label_fixed and isinstance(model, str) and model:
                self.model_id = model
                self._label_fixed = True

    def close(self) -> None:
        self._client.close()
