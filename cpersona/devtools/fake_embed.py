"""A deterministic stand-in for an /embed server (tests, latency benchmarks), which also
answers the OpenAI-compatible `POST /v1/embeddings` (`{model, input}` → `{data: [{embedding,
index}]}`) with vectors deliberately NOT normalised (×3), as some compatible servers do.

Vectors are feature-hashed bags of lower-cased words and character trigrams, L2-normalised:
texts sharing words or substrings get a high cosine, unrelated texts ~0. No model, no
randomness: the same text always gives the same vector.

The server writes status line, headers and body in ONE buffered send with TCP_NODELAY —
split writes on loopback otherwise meet delayed-ACK and add ~40 ms per request.

    python -m cpersona.devtools.fake_embed --port 8401 --dim 512
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import cast

import numpy as np

_WORD = re.compile(r"\w+", re.UNICODE)


def fake_vector(text: str, dim: int = 512) -> np.ndarray:
    """(dim,) float32 unit vector from hashed words and trigrams of `text`."""
    vec = np.zeros(dim, np.float32)
    low = text.lower()
    features = _WORD.findall(low) + [low[i : i + 3] for i in range(max(0, len(low) - 2))]
    for feat in features or [low]:
        digest = hashlib.blake2b(feat.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        h = int.from_bytes(digest, "little")
        vec[h % dim] += 1.0 if (h >> 40) & 1 else -1.0
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return vec / norm


class FakeEmbedServer:
    """Serve POST /embed and GET /health on 127.0.0.1 in a daemon thread.

    Args:
        dim: vector dimension (default 512).
        port: 0 picks a free port; read `url` after `start()`.

    Attributes `requests` (count), `texts` (how often each text was embedded), `fail` (when
    True, answers 503) and `fail_next` (the next N requests answer 503) let tests simulate an
    endpoint going down, coming back, or blipping once.
    """

    def __init__(self, dim: int = 512, port: int = 0, host: str = "127.0.0.1", api_key: str = "") -> None:
        self.dim = dim
        self.api_key = api_key
        self.api_headers: list[dict[str, str]] = []
        self.fail = False
        self.fail_next = 0
        self.requests = 0
        self.texts: Counter[str] = Counter()
        self._httpd = ThreadingHTTPServer((host, port), self._handler())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = cast("tuple[str, int]", self._httpd.server_address[:2])  # AF_INET: (host, port)
        return f"http://{host}:{port}/embed"

    @property
    def api_url(self) -> str:
        """The OpenAI-compatible endpoint."""
        return self.url.removesuffix("/embed") + "/v1/embeddings"

    def start(self) -> FakeEmbedServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeEmbedServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def answer(self, body: bytes) -> tuple[int, dict]:
        """(status, JSON) for one POST /embed body."""
        self.requests += 1
        if self.fail or self.fail_next > 0:
            self.fail_next = max(0, self.fail_next - 1)
            return 503, {"error": "fake endpoint is down"}
        try:
            texts = json.loads(body)["texts"]
            assert isinstance(texts, list) and texts and all(isinstance(t, str) for t in texts)
        except (ValueError, KeyError, TypeError, AssertionError):
            return 400, {"error": "body must be {\"texts\": [non-empty list of strings]}"}
        self.texts.update(texts)
        vectors = [fake_vector(t, self.dim).tolist() for t in texts]
        return 200, {"embeddings": vectors, "dimensions": self.dim, "model": f"fake-hash-{self.dim}"}

    def answer_api(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict]:
        """(status, JSON) for one POST /v1/embeddings; 401 (echoing the key, as providers
        do) when `api_key` is set and the bearer differs."""
        self.requests += 1
        self.api_headers.append(headers)
        presented = headers.get("authorization", "")
        if self.api_key and presented != f"Bearer {self.api_key}":
            return 401, {"error": {"message": f"Incorrect API key provided: {presented[7:]}",
                                   "type": "invalid_request_error", "code": "invalid_api_key"}}
        if self.fail:
            return 503, {"error": {"message": "fake endpoint is down", "type": "server_error"}}
        try:
            doc = json.loads(body)
            texts = doc["input"]
            assert isinstance(texts, list) and texts and all(isinstance(t, str) for t in texts)
        except (ValueError, KeyError, TypeError, AssertionError):
            return 400, {"error": {"message": "input must be a non-empty list of strings", "type": "invalid"}}
        rows = [{"object": "embedding", "index": i, "embedding": (3.0 * fake_vector(t, self.dim)).tolist()}
                for i, t in reversed(list(enumerate(texts)))]
        return 200, {"object": "list", "data": rows, "model": doc.get("model")}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _send(self, status: int, payload: dict) -> None:
                body = json.dumps(payload).encode()
                head = (
                    f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n"
                ).encode()
                self.wfile.write(head + body)
                self.wfile.flush()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.path.startswith("/v1/embeddings"):
                    self._send(*server.answer_api(body, {k.lower(): v for k, v in self.headers.items()}))
                else:
                    self._send(*server.answer(body))

            def do_GET(self) -> None:
                self._send(200, {"status": "ok", "dimensions": server.dim})

            def log_message(self, *args) -> None:
                pass

        return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Deterministic fake /embed server.")
    parser.add_argument("--port", type=int, default=8401)
    parser.add_argument("--dim", type=int, default=512)
    args = parser.parse_args(argv)
    server = FakeEmbedServer(args.dim, args.port)
    print(f"fake /embed on {server.url}", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
