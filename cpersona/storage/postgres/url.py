"""Showing a connection URL without its password."""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit


def display_url(url: str) -> str:
    """The URL with any password replaced by `***` (for logs, errors and `stats`)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://(unparseable URL)"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def with_search_path(url: str, schema: str) -> str:
    """`url` whose connections create and read the tables in `schema` (then `public`, where
    extensions usually live): one database can hold several independent stores."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-c search_path={schema},public')}"
