"""What a release list means for the running version, and the cache of that verdict.

States: `newer` (a later final release exists), `yanked` (the running release was withdrawn;
`latest` names what to move to), `current`, `unpublished` (the project is not on the index).
Pre-releases are offered only to a pre-release. The cache `update-check.json` beside the
database holds the verdict and when it was fetched; a restart within the interval reuses it
and sends no request. It is keyed to the distribution, the running version and the index
URL: an upgrade or another index makes it stale.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from cpersona.updates.index import ReleaseList

log = logging.getLogger("cpersona.updates")

CACHE_NAME = "update-check.json"
CACHE_FORMAT = 1


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check (JSON-serialisable as the cache body)."""

    distribution: str
    running: str
    index: str
    state: str
    checked_at: float
    latest: str | None = None
    yanked_reason: str = ""

    @property
    def offers(self) -> str | None:
        """The version an install would move to, or None."""
        if self.state == "newer" or (self.state == "yanked" and self.latest and self.latest != self.running):
            return self.latest
        return None

    def notice(self) -> str | None:
        """The operator-facing sentence for `newer` / `yanked`, else None."""
        how = f"pip install -U {self.distribution}, or check_update(apply=true)"
        if self.state == "yanked":
            reason = f" ({self.yanked_reason})" if self.yanked_reason else ""
            move = f"; move to {self.latest}: {how}" if self.offers else ""
            return f"the running release {self.distribution} {self.running} was withdrawn (yanked){reason}{move}"
        if self.state == "newer":
            return f"{self.distribution} {self.latest} is available (running {self.running}): {how}"
        return None

    def as_json(self) -> dict[str, Any]:
        body = asdict(self)
        body["checked_at_utc"] = datetime.fromtimestamp(self.checked_at, UTC).isoformat(timespec="seconds")
        return body


def decide(releases: ReleaseList, running: str, index: str, now: float | None = None) -> Verdict:
    """The verdict of `releases` for the running version `running`."""
    stamp = time.time() if now is None else now

    def verdict(state: str, latest: str | None = None, reason: str = "") -> Verdict:
        return Verdict(releases.project, running, index, state, stamp, latest, reason)

    if not releases.published:
        return verdict("unpublished")
    try:
        current = Version(running)
    except InvalidVersion:
        current = Version("0")
    offered = [r.version for r in releases.releases
               if not r.yanked and (current.is_prerelease or not r.version.is_prerelease)]
    latest = max(offered, default=None)
    mine = next((r for r in releases.releases if r.version == current), None)
    latest_text = str(latest) if latest is not None else None
    if mine is not None and mine.yanked:
        return verdict("yanked", latest_text, mine.yanked_reason)
    return verdict("newer" if latest is not None and latest > current else "current", latest_text)


def cache_path(db_file: Path | None) -> Path | None:
    """`update-check.json` beside the database (None for an in-memory database)."""
    return None if db_file is None else db_file.parent / CACHE_NAME


def read_cache(path: Path, distribution: str, running: str, index: str, interval: float,
               now: float | None = None) -> Verdict | None:
    """The cached verdict when it is for this distribution, version and index and younger
    than `interval` seconds (a timestamp in the future counts as stale); else None."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != CACHE_FORMAT:
            return None
        verdict = Verdict(**{k: doc[k] for k in Verdict.__dataclass_fields__ if k in doc})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, AttributeError) as err:
        log.info("update check: ignoring unreadable %s (%s)", path, err)
        return None
    age = (time.time() if now is None else now) - float(verdict.checked_at)
    if (verdict.distribution, verdict.running, verdict.index) != (distribution, running, index):
        return None
    return verdict if 0 <= age < interval else None


def write_cache(path: Path, verdict: Verdict) -> None:
    """Write `verdict` atomically (temporary file + rename); a failure is logged, not raised."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    try:
        tmp.write_text(json.dumps({"format": CACHE_FORMAT, **verdict.as_json()}, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        log.info("update check: cannot write %s (%s); the next start checks again", path, err)
        try:
            tmp.unlink()
        except OSError:
            pass
