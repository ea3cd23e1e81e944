"""`cpersona embed-server` — serve a bundled local model over the HTTP /embed contract.

Contract (what `CPERSONA_EMBEDDING_URL` points at)::

    POST /embed   {"texts": ["...", ...]}          1..100 strings, each ≤ max_text_chars
      200  {"embeddings": [[float, ...], ...], "dimensions": N, "model": "<model_id>"}
      400  {"error": "...", "rule": "<code>"}       bad request (the message names the rule)
      413  {"error": "...", "rule": "body_too_large"}
      503  {"error": "..."} + Retry-After           model still loading, or failed to load
    GET /health
      200  {"status": "ok", "model": ..., "dimensions": N}
      503  {"status": "loading" | "error", "model": ..., "dimensions": N[, "error": "..."]}

Vectors are L2-normalised float32 (sent as JSON numbers); queries and documents are
embedded identically. Embedding runs in a worker thread, never on the event loop.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from cpersona.embedding.base import Embedder, EmbeddingError, EmbeddingNotReady

if TYPE_CHECKING:
    from cpersona.embedding.local import LocalEmbedder

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8401
DEFAULT_MAX_TEXT_CHARS = 16000
MAX_TEXTS = 100
#: Seconds a client should wait before retrying while the model loads.
RETRY_AFTER_SECONDS = 1
#: Worst-case JSON bytes per character: a non-BMP character escaped as two \uXXXX (12 bytes / 2 chars).
_JSON_BYTES_PER_CHAR = 6
_BODY_SLACK_BYTES = 64 * 1024


class RequestError(Exception):
    """A client error, answered as ``{"error": message, "rule": rule}`` with `status`."""

    def __init__(self, status: int, rule: str, message: str) -> None:
        super().__init__(message)
        self.status, self.rule, self.message = status, rule, message


def default_max_body_bytes(max_text_chars: int) -> int:
    """Largest accepted request body (bytes) for a given per-text cap.

    Enough for 100 texts of `max_text_chars` characters even when every character is
    JSON-escaped (6 bytes each), plus 64 KiB of slack: ≈9.7 MB at the default 16000.
    """
    return MAX_TEXTS * max_text_chars * _JSON_BYTES_PER_CHAR + _BODY_SLACK_BYTES


# --- validation: an ordered table of (rule code, check) ------------------------------------
# Each check takes (payload, max_text_chars) and returns an error message or None. Checks run
# in order and may assume every earlier check passed.

def _first_index(items: list[Any], bad: Callable[[Any], bool]) -> int | None:
    return next((i for i, item in enumerate(items) if bad(item)), None)


def _check_object(p: Any, cap: int) -> str | None:
    return None if isinstance(p, dict) else 'request body must be a JSON object like {"texts": ["..."]}'


def _check_present(p: dict, cap: int) -> str | None:
    return None if "texts" in p else "'texts' is required"


def _check_list(p: dict, cap: int) -> str | None:
    texts = p["texts"]
    return None if isinstance(texts, list) else f"'texts' must be a list of strings, got {type(texts).__name__}"


def _check_not_empty(p: dict, cap: int) -> str | None:
    return None if p["texts"] else f"'texts' must not be empty (1..{MAX_TEXTS} texts per request)"


def _check_max_items(p: dict, cap: int) -> str | None:
    n = len(p["texts"])
    return None if n <= MAX_TEXTS else f"'texts' has {n} items; at most {MAX_TEXTS} per request"


def _check_strings(p: dict, cap: int) -> str | None:
    i = _first_index(p["texts"], lambda t: not isinstance(t, str))
    return None if i is None else f"texts[{i}] must be a string, got {type(p['texts'][i]).__name__}"


def _check_length(p: dict, cap: int) -> str | None:
    i = _first_index(p["texts"], lambda t: len(t) > cap)
    return None if i is None else f"texts[{i}] has {len(p['texts'][i])} characters; at most {cap} allowed"


_RULES: tuple[tuple[str, Callable[[Any, int], str | None]], ...] = (
    ("body_not_object", _check_object),
    ("texts_missing", _check_present),
    ("texts_not_list", _check_list),
    ("texts_empty", _check_not_empty),
    ("texts_too_many", _check_max_items),
    ("text_not_string", _check_strings),
    ("text_too_long", _check_length),
)


def validate_payload(payload: Any, max_text_chars: int = DEFAULT_MAX_TEXT_CHARS) -> list[str]:
    """Return ``payload["texts"]`` if it satisfies every rule in `_RULES`.

    Raises:
        RequestError: status 400 naming the first broken rule.
    """
    for rule, check in _RULES:
        message = check(payload, max_text_chars)
        if message:
            raise RequestError(400, rule, message)
    return payload["texts"]


async def _read_body(request: Request, limit: int) -> bytes:
    """Read the request body, refusing (413) as soon as it exceeds `limit` bytes."""
    too_large = RequestError(413, "body_too_large", f"request body exceeds {limit} bytes")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _parse_json(body: bytes) -> Any:
    """Decode a JSON body; raises RequestError(400, "invalid_json")."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError / UnicodeDecodeError are ValueErrors
        raise RequestError(400, "invalid_json", f"request body is not valid JSON: {exc}") from None


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status, headers=_retry_headers(status))


def _retry_headers(status: int) -> dict[str, str] | None:
    return {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None


def _embedding_failure(embedder: Embedder, exc: EmbeddingError) -> JSONResponse:
    """503 while loading or after a failed load (operator must act), 500 for other failures."""
    unavailable = isinstance(exc, EmbeddingNotReady) or bool(getattr(embedder, "load_error", None))
    return _error(503 if unavailable else 500, str(exc))


def _health_state(embedder: Embedder) -> tuple[str, int]:
    """(status word, HTTP status) for /health."""
    if embedder.ready():
        return "ok", 200
    return ("error" if getattr(embedder, "load_error", None) else "loading"), 503


def build_app(
    embedder: Embedder,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    max_body_bytes: int | None = None,
) -> Starlette:
    """Build the Starlette app serving `embedder` (POST /embed, GET /health).

    Args:
        embedder: any Embedder; if it has a ``start()`` method it is called at app startup
            (lifespan), so a lazily-loading LocalEmbedder begins warming up immediately.
            The app never closes the embedder: its owner does.
        max_text_chars: per-text cap in characters (default 16000).
        max_body_bytes: request body cap in bytes (default `default_max_body_bytes`).
    """
    if max_text_chars < 1:
        raise ValueError(f"max_text_chars must be >= 1, got {max_text_chars}")
    body_limit = max_body_bytes or default_max_body_bytes(max_text_chars)

    async def embed(request: Request) -> JSONResponse:
        try:
            texts = validate_payload(_parse_json(await _read_body(request, body_limit)), max_text_chars)
        except RequestError as exc:
            return _error(exc.status, exc.message, rule=exc.rule)
        try:
            vectors = await run_in_threadpool(embedder.embed, texts)
        except EmbeddingError as exc:
            return _embedding_failure(embedder, exc)
        return JSONResponse(
            {"embeddings": vectors.tolist(), "dimensions": int(vectors.shape[1]), "model": embedder.model_id}
        )

    async def health(request: Request) -> JSONResponse:
        status, code = _health_state(embedder)
        body = {"status": status, "model": embedder.model_id, "dimensions": embedder.dim}
        if status == "error":
            body["error"] = embedder.load_error  # type: ignore[attr-defined]
        return JSONResponse(body, status_code=code)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        start = getattr(embedder, "start", None)
        if callable(start):
            start()
        yield

    return Starlette(
        routes=[Route("/embed", embed, methods=["POST"]), Route("/health", health, methods=["GET"])],
        exception_handlers={HTTPException: _http_exception, Exception: _unexpected},
        lifespan=lifespan,
    )


async def _http_exception(request: Request, exc: Exception) -> JSONResponse:
    """404 / 405 and other routing errors as JSON."""
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unexpected error serving %s", request.url.path)
    return JSONResponse({"error": f"internal error: {type(exc).__name__}"}, status_code=500)


# --- CLI -----------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    from cpersona.embedding.local import MODELS, default_model_name

    p = argparse.ArgumentParser(
        prog="cpersona embed-server",
        description="Serve a bundled local embedding model over HTTP (POST /embed, GET /health).",
    )
    p.add_argument("--host", default=DEFAULT_HOST, help=f"bind address (default {DEFAULT_HOST})")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    p.add_argument("--model", choices=list(MODELS), default=default_model_name() or "use",
                   help=f"bundled model (default: first installed of {', '.join(MODELS)})")
    p.add_argument("--threads", type=int, default=1, help="compute threads for the model (default 1)")
    p.add_argument("--max-text-chars", type=int, default=DEFAULT_MAX_TEXT_CHARS,
                   help=f"longest accepted text in characters (default {DEFAULT_MAX_TEXT_CHARS})")
    p.add_argument("-v", "--verbose", action="store_true", help="log model loading and every request to stderr")
    return p


def _parse_args(argv: list[str] | None) -> argparse.Namespace | int:
    """Parsed options, or the exit code argparse chose (0 for --help, 2 for bad usage)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.threads < 1 or args.max_text_chars < 1 or not 0 <= args.port <= 65535:
        parser.print_usage(sys.stderr)
        print("cpersona embed-server: --threads and --max-text-chars must be >= 1, --port 0..65535",
              file=sys.stderr)
        return 2
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the embed server until interrupted. Returns a process exit code.

    0 after a clean shutdown (Ctrl-C); uvicorn's code (3) if it could not start (e.g. port in
    use); 2 for bad options or a model whose package is not installed (one line on stderr
    naming the pip extra).
    """
    from cpersona.embedding.local import LocalEmbedder, model_installed, model_spec

    args = _parse_args(argv)
    if isinstance(args, int):
        return args
    if not model_installed(args.model):
        hint = model_spec(args.model).install_hint()
        print(f"cpersona embed-server: model {args.model!r} is not installed; run: {hint}", file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    embedder = LocalEmbedder(args.model, threads=args.threads, background=True)
    app = build_app(embedder, max_text_chars=args.max_text_chars)
    return _serve(app, args, embedder)


def _serve(app: Starlette, args: argparse.Namespace, embedder: LocalEmbedder) -> int:
    import uvicorn

    logger.info("serving %s on http://%s:%d/embed", embedder.model_id, args.host, args.port)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_config=None,
                    log_level="info" if args.verbose else "warning", access_log=args.verbose)
    except SystemExit as exc:  # uvicorn exits(3) when it cannot bind
        return int(exc.code or 0)
    finally:
        embedder.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
