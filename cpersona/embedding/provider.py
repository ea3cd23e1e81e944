"""Choose the embedding backend from settings (CPERSONA_EMBEDDING_MODE).

| mode  | backend                                                                 |
|-------|-------------------------------------------------------------------------|
| auto  | http when CPERSONA_EMBEDDING_URL is set; else the bundled model when     |
|       | installed (`pip install 'cpersona-memory[embed]'`); else none        |
| http  | the /embed server at CPERSONA_EMBEDDING_URL (required)                   |
| api   | an OpenAI-compatible endpoint: CPERSONA_EMBEDDING_API_URL, _API_KEY,     |
|       | CPERSONA_EMBEDDING_MODEL (default text-embedding-3-small)               |
| local | the bundled model CPERSONA_LOCAL_MODEL (use | e5), loaded in background  |
| none  | no vectors; recall is keyword-only and says so (`advisory.severity=hint`)|
"""

from __future__ import annotations

from cpersona.config import Settings
from cpersona.embedding.base import Embedder
from cpersona.errors import ConfigError


def _http(settings: Settings) -> Embedder:
    from cpersona.embedding.http import HttpEmbedder

    if not settings.embedding_url:
        raise ConfigError("CPERSONA_EMBEDDING_MODE=http needs CPERSONA_EMBEDDING_URL (e.g. http://127.0.0.1:8401/embed)")
    return HttpEmbedder(settings.embedding_url, settings.embedding_timeout_secs, settings.embedding_model)


def _api(settings: Settings) -> Embedder:
    from cpersona.embedding.api import ApiEmbedder

    key, url = settings.embedding_api_key, settings.embedding_api_url.strip()
    if not url:
        raise ConfigError("CPERSONA_EMBEDDING_MODE=api needs CPERSONA_EMBEDDING_API_URL")
    if not key and url.startswith("https://api.openai.com/"):
        raise ConfigError("CPERSONA_EMBEDDING_MODE=api with the OpenAI endpoint needs CPERSONA_EMBEDDING_API_KEY")
    if key != key.strip() or not key.isascii() or any(c.isspace() for c in key):
        raise ConfigError("CPERSONA_EMBEDDING_API_KEY contains whitespace or non-ASCII characters "
                          "(a newline from a file?); nothing is trimmed — fix the value")
    return ApiEmbedder(url, key, settings.embedding_model, settings.embedding_timeout_secs)


def _local(settings: Settings) -> Embedder:
    from cpersona.embedding import local

    name = settings.local_model
    if not local.model_installed(name):
        hint = local.model_spec(name).install_hint()
        raise ConfigError(f"CPERSONA_EMBEDDING_MODE=local needs the bundled model '{name}': {hint}")
    # Loading starts when the Engine starts its background work (at process start).
    return local.LocalEmbedder(name, threads=settings.embedding_threads, background=True,
                               process=settings.embedding_process)


def resolve_mode(settings: Settings) -> str:
    """The concrete mode ("http", "api", "local" or "none") that `auto` stands for here
    (`auto` never picks api: sending the corpus to a remote service is an explicit choice)."""
    if settings.embedding_mode != "auto":
        return settings.embedding_mode
    if settings.embedding_url:
        return "http"
    from cpersona.embedding import local

    return "local" if local.model_installed(settings.local_model) else "none"


_BUILDERS = {"http": _http, "api": _api, "local": _local, "none": lambda settings: None}


def build_embedder(settings: Settings) -> Embedder | None:
    """The backend for `settings`, or None for mode none. Raises ConfigError when the
    requested backend cannot exist (URL missing, model package not installed)."""
    return _BUILDERS[resolve_mode(settings)](settings)
