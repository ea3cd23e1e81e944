"""`UpdateCheck`: the once-per-start check in a background thread, its notices, and the
answer of the `check_update` tool.

Nothing here ever blocks startup or a tool call on the network: the fetch runs in a daemon
thread; `check_update(refresh=true)` starts another fetch and returns at once; an install
(`apply=true`) runs pip in a background thread and reports through later calls. Offline is
one INFO line. A verdict worth acting on (newer release, running release yanked) is logged
at WARNING and given once to the next recall and to every status answer.
With CPERSONA_UPDATE_CHECK=false nothing happens at all: no request, no file, no notice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from cpersona import __version__
from cpersona.config import Settings
from cpersona.errors import UpdateCheckError
from cpersona.updates import DISTRIBUTION
from cpersona.updates.index import fetch_releases
from cpersona.updates.install import Runner, install_problem, run_install
from cpersona.updates.verdict import Verdict, cache_path, decide, read_cache, write_cache

log = logging.getLogger("cpersona.updates")

DISABLED = "CPERSONA_UPDATE_CHECK=false: no request is made, no file written, no notice given"


class UpdateCheck:
    """The update check of one server process.

    Args:
        settings: update_check, update_index_url, update_check_interval_seconds, db_path.
        running: the running version (default `cpersona.__version__`).
        runner / probe: how pip runs and what forbids an install (replaced in tests).
    """

    def __init__(self, settings: Settings, running: str = __version__, runner: Runner | None = None,
                 probe: Callable[[str], str | None] = install_problem) -> None:
        self.enabled = settings.update_check
        self.distribution = DISTRIBUTION
        self.running = running
        self.index = settings.update_index_url
        self.interval = float(settings.update_check_interval_seconds)
        self.path = cache_path(settings.db_file) if self.enabled else None
        self._runner = runner
        self._probe = probe
        self._lock = threading.Lock()
        self._verdict: Verdict | None = None
        self._source: str | None = None
        self._error: str | None = None
        self._thread: threading.Thread | None = None
        self._install: dict[str, Any] | None = None
        self._recall_told = False

    # ----------------------------------------------------------------- the check
    def start(self, force: bool = False) -> bool:
        """Start the check in a daemon thread (no-op when disabled or one is running).
        `force` skips the cache. Returns True when a check was started."""
        if not self.enabled:
            return False
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return False
            self._thread = threading.Thread(target=self._run, args=(force,), name="cpersona-update-check",
                                            daemon=True)
            self._thread.start()
        return True

    def join(self, timeout: float | None = None) -> None:
        """Wait for a running check (tests, shutdown)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self, force: bool) -> None:
        if not force and self.path is not None:
            cached = read_cache(self.path, self.distribution, self.running, self.index, self.interval)
            if cached is not None:
                self._adopt(cached, "cache")
                return
        try:
            releases = fetch_releases(self.index, self.distribution)
        except UpdateCheckError as err:
            with self._lock:
                self._error = str(err)
            log.info("update check skipped: %s; the next start tries again", err)
            return
        verdict = decide(releases, self.running, self.index)
        if self.path is not None:
            write_cache(self.path, verdict)
        self._adopt(verdict, "index")

    def _adopt(self, verdict: Verdict, source: str) -> None:
        with self._lock:
            self._verdict, self._source, self._error = verdict, source, None
        notice = verdict.notice()
        if notice:
            log.warning("update check: %s", notice)
        else:
            log.info("update check: %s %s is %s (from %s)", self.distribution, self.running, verdict.state, source)

    # --------------------------------------------------------------- notices
    def status_notice(self) -> str | None:
        """The notice for status answers (every time while it holds), or None."""
        with self._lock:
            verdict = self._verdict
        return verdict.notice() if verdict is not None else None

    def recall_notice(self) -> str | None:
        """The notice for the next recall only (agents recall often; once is enough)."""
        notice = self.status_notice()
        with self._lock:
            if notice is None or self._recall_told:
                return None
            self._recall_told = True
        return notice

    # ------------------------------------------------------------ check_update
    def report(self, refresh: bool = False, apply: bool = False) -> dict[str, Any]:
        """The `check_update` answer; `refresh` starts a fresh fetch, `apply` an install of
        the offered release (both in the background). See `tools` for the shape."""
        base: dict[str, Any] = {"enabled": self.enabled, "distribution": self.distribution,
                                "running_version": self.running}
        if not self.enabled:
            if refresh or apply:
                return {"ok": False, **base, "error": f"{'apply' if apply else 'refresh'}: {DISABLED}"}
            return {**base, "detail": DISABLED}
        out = {**base, **self._state()}
        if refresh:
            out["refresh"] = "started" if self.start(force=True) else "a check is already running"
            out["checking"] = True
        if apply:
            error = self._apply()
            if error is not None:
                return {"ok": False, **out, "error": f"apply: {error}"}
            out["install"] = dict(self._install or {})
        return out

    def _state(self) -> dict[str, Any]:
        with self._lock:
            verdict, source, error = self._verdict, self._source, self._error
            install = dict(self._install) if self._install else None
            checking = self._thread is not None and self._thread.is_alive()
        state: dict[str, Any] = {"state": verdict.state if verdict else "unknown", "checking": checking}
        if verdict is not None:
            state.update(latest=verdict.latest, notice=verdict.notice(), source=source,
                         checked_at=verdict.as_json()["checked_at_utc"])
            if verdict.yanked_reason:
                state["yanked_reason"] = verdict.yanked_reason
        if error is not None:
            state["last_error"] = error
        if install is not None:
            state["install"] = install
        return state

    def _apply(self) -> str | None:
        with self._lock:
            verdict = self._verdict
            busy = self._install is not None and self._install.get("state") == "running"
        if busy:
            return "an install is already running"
        if verdict is None:
            return "no verdict yet; call check_update(refresh=true) and try again when it reports a newer release"
        version = verdict.offers
        if version is None:
            return f"nothing to install: {self.distribution} {self.running} is {verdict.state}"
        problem = self._probe(self.distribution)
        if problem is not None:
            return problem
        with self._lock:
            self._install = {"state": "running", "version": version}
        threading.Thread(target=self._install_now, args=(version,), name="cpersona-update-install",
                         daemon=True).start()
        return None

    def _install_now(self, version: str) -> None:
        result = run_install(self.distribution, version, *([self._runner] if self._runner else []))
        state = "installed" if result["ok"] else "failed"
        detail = "restart the server to run it" if result["ok"] else "the running copy is unchanged"
        with self._lock:
            self._install = {**result, "state": state, "detail": detail}
        (log.warning if result["ok"] else log.error)("update install of %s==%s %s", self.distribution, version, state)
