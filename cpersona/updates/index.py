"""Read this distribution's release list from a package index's JSON API
(`GET <base>/<project>/json`, the API pypi.org documents as "JSON API" → "Project").

The request is a plain GET with the HTTP client's default User-Agent and no query, cookie
or body: nothing about the deployment (ids, corpus, settings, the running version) is sent.
The answer is trusted only for the project it names: an index that answers with another
project's data (`info.name` differs after PEP 503 normalisation) is refused, so a release of
another distribution is never offered.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx2
from packaging.version import InvalidVersion, Version

from cpersona.errors import UpdateCheckError

#: Seconds to open the connection / to wait for the next bytes of the answer.
CONNECT_TIMEOUT_SECS = 5.0
READ_TIMEOUT_SECS = 10.0
#: Largest answer read (a project's JSON grows with its release count; pypi.org's biggest are a few MB).
MAX_ANSWER_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Release:
    """One version on the index; `yanked` when every file of it is yanked (PEP 592)."""

    version: Version
    yanked: bool
    yanked_reason: str = ""


@dataclass(frozen=True)
class ReleaseList:
    """The releases of `project` (empty `releases` with `published` False: not on the index)."""

    project: str
    published: bool
    releases: tuple[Release, ...] = field(default_factory=tuple)


def normalise(name: str) -> str:
    """PEP 503 name normalisation: runs of -, _, . become one -, lower case."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_url(base: str, project: str) -> str:
    """`<base>/<project>/json` (base e.g. https://pypi.org/pypi)."""
    return f"{base.rstrip('/')}/{normalise(project)}/json"


def fetch_releases(base: str, project: str) -> ReleaseList:
    """GET the project's JSON and parse it. A 404 means the project is not published.

    Raises:
        UpdateCheckError: unreachable, timeout, non-2xx other than 404, oversized or malformed
            answer, or an answer about another project.
    """
    url = project_url(base, project)
    timeout = httpx2.Timeout(READ_TIMEOUT_SECS, connect=CONNECT_TIMEOUT_SECS)
    try:
        with httpx2.Client(timeout=timeout, follow_redirects=False) as client, \
                client.stream("GET", url, headers={"Accept": "application/json"}) as response:
            if response.status_code == 404:
                return ReleaseList(project, published=False)
            if response.status_code != 200:
                raise UpdateCheckError(f"{url} answered HTTP {response.status_code}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body.extend(chunk)
                if len(body) > MAX_ANSWER_BYTES:
                    raise UpdateCheckError(f"{url} answered more than {MAX_ANSWER_BYTES} bytes")
    except httpx2.HTTPError as err:
        raise UpdateCheckError(f"{url} unreachable: {type(err).__name__}: {err}") from None
    return parse_project(bytes(body), project)


def parse_project(body: bytes, project: str) -> ReleaseList:
    """Parse a JSON API answer for `project`.

    Raises UpdateCheckError when it is not JSON, lacks `info.name` / `releases`, or names another project."""
    try:
        doc = json.loads(body)
        name = doc["info"]["name"]
        releases = doc["releases"]
    except (ValueError, KeyError, TypeError):
        raise UpdateCheckError("the index answer is not a project JSON (info.name, releases)") from None
    if not isinstance(name, str) or normalise(name) != normalise(project):
        raise UpdateCheckError(f"the index answered for project {name!r}, not {project!r}; ignored")
    if not isinstance(releases, dict):
        raise UpdateCheckError("the index answer's releases is not an object")
    parsed = [r for r in (_release(v, files) for v, files in releases.items()) if r is not None]
    return ReleaseList(project, True, tuple(sorted(parsed, key=lambda r: r.version)))


def _release(text: Any, files: Any) -> Release | None:
    try:
        version = Version(str(text))
    except InvalidVersion:
        return None
    if not isinstance(files, list) or not files:
        return None  # a version with no files cannot be installed
    yanked = all(isinstance(f, dict) and f.get("yanked") is True for f in files)
    reasons = [f.get("yanked_reason") for f in files if isinstance(f, dict) and f.get("yanked_reason")]
    return Release(version, yanked, str(reasons[0]) if yanked and reasons else "")
