"""Choose the embedding backend from settings (CPERSONA_EMBEDDING_MODE).

| mode  | backend                                                                 |
|-------|-------------------------------------------------------------------------|
| auto  | http when CPERSONA_EMBEDDING_URL is set; else the bundled model when     |
|       | installed (`pip install 'cpersona[embed]'`); else none (degraded: FTS) |
| http  | the /embed server at CPERSONA_EMBEDDING_URL (required)                   |
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


def _local(settings: Settings) -> Embedder:
    from cpersona.embedding import local

    name = settings.local_model
    if not local.model_installed(name):
        hint = local.model_spec(name).install_hint()
        raise ConfigError(f"CPERSONA_EMBEDDING_MODE=local needs the bundled model '{name}': {hint}")
    # Loading starts when the Engine starts its background work (at process start).
    return local.LocalEmbedder(name, threads=settings.embedding_threads, background=True)


def resolve_mode(settings: Settings) -> str:
    """The concrete mode ("http", "local" or "none") that `auto` stands for here."""
    if settings.embedding_mode != "auto":
        return settings.embedding_mode
    if settings.embedding_url:
        return "http"
    from cpersona.embedding import local

    return "local" if local.model_installed(settings.local_model) else "none"


_BUILDERS = {"http": _http, "local": _local, "none": lambda settings: None}


def build_embedder(settings: Settings) -> Embedder | None:
    """The backend for `settings`, or None for mode none. Raises ConfigError when the
    requested backend cannot exist (URL missing, model package not installed)."""
    return _BUILDERS[resolve_mode(settings)](settings)
