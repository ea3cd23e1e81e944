"""`api` embedding backend: an OpenAI-compatible embeddings endpoint.

`POST <CPERSONA_EMBEDDING_API_URL>` with `Authorization: Bearer <CPERSONA_EMBEDDING_API_KEY>`
and `{"model": <CPERSONA_EMBEDDING_MODEL>, "input": [texts]}` → `{"data": [{"embedding":
[...], "index": i}, ...]}` (the OpenAI API reference, "Embeddings"). Rows are put back in
input order by `index` and L2-normalised here, because similarity is a raw dot product and
not every compatible server normalises (a norm ≤ 1e-9 is left as is and then refused as
not normalised). The key is sent only in the header: it never appears in a log line or an
error message, and any echo of it in a server's answer is masked.
"""

from __future__ import annotations

from typing import Any

import httpx2
import numpy as np

from cpersona.embedding.base import EmbeddingError, check_vectors
from cpersona.embedding.http import CONNECT_TIMEOUT_SECS

#: Model asked for when CPERSONA_EMBEDDING_MODEL is empty (OpenAI's default small model).
DEFAULT_MODEL = "text-embedding-3-small"
#: Norms at or below this are left unscaled (a zero vector has no direction).
MIN_NORM = 1e-9
MASK = "***"


class ApiEmbedder:
    """Client of an OpenAI-compatible embeddings endpoint.

    Args:
        url: e.g. "https://api.openai.com/v1/embeddings".
        key: the bearer key ('' = send no Authorization header, for local servers).
        model: model name sent with every request and recorded with stored vectors.
        timeout: seconds for the whole request.
    """

    mode = "api"

    def __init__(self, url: str, key: str, model: str = "", timeout: float = 30.0) -> None:
        self.url = url
        self.model = model or DEFAULT_MODEL
        self.model_id = self.model
        self.dim: int | None = None
        self._key = key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx2.Client(timeout=httpx2.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_SECS)),
                                     headers=headers)

    def __repr__(self) -> str:
        return f"ApiEmbedder(url={self.url!r}, model={self.model!r}, key={'set' if self._key else 'unset'})"

    def ready(self) -> bool:
        return True

    def embed(self, texts: list[str]) -> np.ndarray:
        """POST `texts` → (len(texts), dim) float32, L2-normalised here.

        Raises:
            EmbeddingError: transport failure, non-2xx (with the server's error type/code, never
                its message text), malformed answer, wrong count or dimension.
        """
        if not texts:
            raise EmbeddingError("no texts to embed")
        try:
            response = self._client.post(self.url, json={"model": self.model, "input": texts})
        except httpx2.HTTPError as err:
            raise EmbeddingError(self._mask(f"POST {self.url} failed: {type(err).__name__}: {err}")) from None
        if response.status_code >= 400:
            raise EmbeddingError(self._mask(f"POST {self.url} answered HTTP {response.status_code}{_reason(response)}"))
        try:
            body = response.json()
            rows = sorted(body["data"], key=lambda row: row.get("index", 0))
            raw = np.asarray([row["embedding"] for row in rows], dtype=np.float64)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EmbeddingError(f"POST {self.url} answered without a data[].embedding list") from None
        if raw.ndim == 2:
            norms = np.linalg.norm(raw, axis=1, keepdims=True)
            raw = np.where(norms > MIN_NORM, raw / np.where(norms > MIN_NORM, norms, 1.0), raw)
        vectors = check_vectors(raw, len(texts), self.dim)
        self.dim = vectors.shape[1]
        return vectors

    def _mask(self, text: str) -> str:
        return text.replace(self._key, MASK) if self._key else text

    def close(self) -> None:
        self._client.close()


def _reason(response: httpx2.Response) -> str:
    """`" (type: …, code: …)"` from an OpenAI-style error body; the free-text message is
    left out (providers quote a partial key there)."""
    try:
        error: Any = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(error, dict):
        return ""
    parts = [f"{k}: {error[k]}" for k in ("type", "code") if isinstance(error.get(k), str | int) and error.get(k)]
    return f" ({', '.join(parts)})" if parts else ""
