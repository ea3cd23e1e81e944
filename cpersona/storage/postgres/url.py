"""Showing a connection URL without its password."""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit, urlunsplit

_QUERY_SECRET = re.compile(r"(?i)((?:^|&)(?:password|sslpassword)=)[^&]*")


def display_url(url: str) -> str:
    """The URL with any password (in the authority or as a `password=` parameter) replaced
    by `***` (for logs, errors and `stats`)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "postgresql://(unparseable URL)"
    head, sep, query = url.partition("?")
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{port}" if port else "")
        head = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return head + sep + _QUERY_SECRET.sub(r"\1***", query)


def with_search_path(url: str, schema: str) -> str:
    """`url` whose connections create and read the tables in `schema` (then `public`, where
    extensions usually live): one database can hold several independent stores."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-c search_path={schema},public')}"
