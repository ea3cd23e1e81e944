"""The update check against a local fake package index (CPERSONA_UPDATE_INDEX_URL): off means
no socket at all; a hanging index blocks neither startup nor tools; only this distribution's
releases are ever offered; the verdict is cached; notices reach recall and status answers."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from cpersona.config import Settings
from cpersona.updates import DISTRIBUTION
from cpersona.updates.checker import UpdateCheck
from cpersona.updates.verdict import CACHE_NAME

from conftest import run_mcp, wait_until
from http_helpers import LocalServer, QuietHandler


def project(name: str, releases: dict[str, bool | str]) -> dict:
    """A JSON API body: version → False (normal) / True (yanked) / "reason" (yanked with reason)."""
    files = {v: [{"filename": f"{name}-{v}.whl", "yanked": bool(y), "yanked_reason": y if isinstance(y, str) else None}]
             for v, y in releases.items()}
    return {"info": {"name": name, "version": max(releases)}, "releases": files}


class FakeIndex:
    """Serves GET /pypi/<name>/json from `projects`; records every request; `hang` holds
    answers until `release()`."""

    def __init__(self, projects: dict[str, dict], hang: bool = False) -> None:
        self.projects = projects
        self.requests: list[dict] = []
        self._go = threading.Event()
        if not hang:
            self._go.set()
        self.server = LocalServer(self._handler())
        self.url = f"{self.server.base}/pypi"

    def release(self) -> None:
        self._go.set()

    def stop(self) -> None:
        self.release()
        self.server.stop()

    def _handler(self):
        index = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                index.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                       "body": self.rfile.read(length) if length else b""})
                index._go.wait(60)
                name = self.path.removeprefix("/pypi/").removesuffix("/json")
                doc = index.projects.get(name)
                self.reply(200 if doc is not None else 404,
                           json.dumps(doc if doc is not None else {"message": "Not Found"}).encode())

        return Handler


@pytest.fixture
def index_factory():
    made: list[FakeIndex] = []

    def factory(projects: dict[str, dict], hang: bool = False) -> FakeIndex:
        made.append(FakeIndex(projects, hang))
        return made[-1]

    yield factory
    for index in made:
        index.stop()


def checker(tmp_path: Path, index: FakeIndex | str, running: str = "0.1.0", **kw) -> UpdateCheck:
    url = index if isinstance(index, str) else index.url
    settings = Settings.from_env({}, db_path=str(tmp_path / "u.db"), update_index_url=url, update_check=True)
    return UpdateCheck(settings, running=running, **kw)


def server_env(index: FakeIndex, **extra: str) -> dict[str, str]:
    return {"CPERSONA_UPDATE_CHECK": "true", "CPERSONA_UPDATE_INDEX_URL": index.url, **extra}


# ----------------------------------------------------------------- switched off
def test_disabled_opens_no_socket_writes_no_file_gives_no_notice(tmp_path, make_engine, index_factory, monkeypatch):
    index = index_factory({DISTRIBUTION: project(DISTRIBUTION, {"0.1.0": False, "9.0.0": False})})
    engine = make_engine(update_check=False, update_index_url=index.url)
    opened: list[str] = []

    def refuse(*args, **kwargs):
        opened.append(repr(args))
        raise AssertionError("the disabled update check opened a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    assert engine.updates.start() is False
    engine.updates.join(5)
    engine.store("a", "a fact")
    from cpersona.service.requests import RecallRequest

    recalled = engine.recall(RecallRequest(agent_id="a", query="fact"))
    report = engine.check_update()
    refresh = engine.check_update(refresh=True)
    apply = engine.check_update(apply=True)
    monkeypatch.undo()
    assert opened == [] and index.requests == []
    assert not (tmp_path / CACHE_NAME).exists()
    assert "update_notice" not in recalled and "update_notice" not in engine.persistence_status()
    assert report["enabled"] is False and "no request" in report["detail"]
    assert refresh["ok"] is False and apply["ok"] is False


def test_disabled_server_process_never_asks_the_index(tmp_path, index_factory):
    index = index_factory({DISTRIBUTION: project(DISTRIBUTION, {"9.0.0": False})})

    async def scenario(client):
        await client.call("recall", {"agent_id": "a", "query": "x"})
        return await client.call("check_update")

    run = run_mcp(scenario, tmp_path / "s.db", server_env(index, CPERSONA_UPDATE_CHECK="false"))
    time.sleep(0.5)
    assert run.result.data["enabled"] is False
    assert index.requests == [] and not (tmp_path / CACHE_NAME).exists()


# ----------------------------------------------------------------- never blocks
def test_a_hanging_index_blocks_neither_startup_nor_tool_calls(tmp_path, index_factory):
    index = index_factory({DISTRIBUTION: project(DISTRIBUTION, {"9.0.0": False})}, hang=True)

    async def scenario(client):
        with anyio.fail_after(30):
            while not index.requests:
                await anyio.sleep(0.05)
        answers = [await client.call("store", {"agent_id": "a", "message": {"content": "written while waiting"}}),
                   await client.call("recall", {"agent_id": "a", "query": "written"}),
                   await client.call("check_update")]
        still_hanging = not index._go.is_set()
        index.release()
        return answers, still_hanging

    run = run_mcp(scenario, tmp_path / "s.db", server_env(index))
    (stored, recalled, report), still_hanging = run.result
    assert still_hanging, "every call was answered while the index had not answered"
    assert stored.data["result"] == "stored" and recalled.data["messages"]
    assert report.data["state"] == "unknown" and report.data["checking"] is True


# ------------------------------------------------------------ what is offered
def test_newer_release_notice_reaches_log_recall_once_and_status(tmp_path, index_factory):
    index = index_factory({DISTRIBUTION: project(DISTRIBUTION, {"0.1.0": False, "0.2.0": False, "0.3.0b1": False})})

    async def scenario(client):
        with anyio.fail_after(30):
            while not (tmp_path / CACHE_NAME).exists():
                await anyio.sleep(0.05)
        return [await client.call(t, a) for t, a in (
            ("recall", {"agent_id": "a", "query": "x"}), ("recall", {"agent_id": "a", "query": "x"}),
            ("persistence_status", {}), ("get_queue_status", {}), ("check_update", {}))]

    run = run_mcp(scenario, tmp_path / "s.db", server_env(index, CPERSONA_LOG_LEVEL="info"))
    first, second, status, queue, report = (r.data for r in run.result)
    assert "0.2.0 is available" in first["update_notice"] and "update_notice" not in second
    assert status["update_notice"] == first["update_notice"] == queue["update_notice"]
    assert report["state"] == "newer" and report["latest"] == "0.2.0" and report["source"] == "index"
    assert "WARNING cpersona.updates: update check: " in run.stderr
    cached = json.loads((tmp_path / CACHE_NAME).read_text())
    assert cached["state"] == "newer" and cached["distribution"] == DISTRIBUTION and cached["checked_at"] > 0


def test_request_carries_nothing_about_the_deployment(tmp_path, index_factory):
    index = index_factory({DISTRIBUTION: project(DISTRIBUTION, {"0.1.0": False})})
    check = checker(tmp_path, index)
    check.start()
    check.join(30)
    (request,) = index.requests
    assert request["path"] == f"/pypi/{DISTRIBUTION}/json" and request["body"] == b""
    headers = request["headers"]
    assert headers["user-agent"].startswith("python-httpx") and "cpersona" not in headers["user-agent"]
    assert set(headers) <= {"host", "accept", "accept-encoding", "connection", "user-agent"}


def test_another_distributions_release_is_never_offered(tmp_path, index_factory):
    original = project("cpersona", {"0.1.0": False, "9.9.9": False})
    # our name answered with the other project's JSON (a mirror rewrite, a typo-squat, a misconfiguration)
    spoofed = index_factory({DISTRIBUTION: original, "cpersona": original})
    check = checker(tmp_path, spoofed, probe=lambda _dist: None)
    check.start()
    check.join(30)
    report = check.report(apply=True)
    assert report["state"] == "unknown" and "not 'cpersona-memory'" in report["last_error"]
    assert report["ok"] is False and "no verdict" in report["error"]
    assert check.status_notice() is None and not (tmp_path / CACHE_NAME).exists()
    # our name unpublished while the original's name has releases: nothing to offer either
    unpublished = index_factory({"cpersona": original})
    check = checker(tmp_path, unpublished)
    check.start()
    check.join(30)
    assert check.report()["state"] == "unpublished" and check.status_notice() is None
    assert [r["path"] for r in unpublished.requests] == [f"/pypi/{DISTRIBUTION}/json"]


def test_running_release_yanked(tmp_path, index_factory):
    index = index_factory({DISTRIBUTION: project(DISTRIBUTION, {"0.1.0": "data loss on import", "0.1.1": False})})
    check = checker(tmp_path, index)
    check.start()
    check.join(30)
    notice = check.status_notice()
    assert "0.1.0 was withdrawn (yanked)" in notice and "data loss on import" in notice and "0.1.1" in notice
    assert check.report()["state"] == "yanked"


def test_restart_within_the_interval_makes_no_request_and_a_stale_cache_does(tmp_path, index_factory):
    index = index_factory({DISTRIBUTION: project(DISTRIBUTION, {"0.1.0": False, "0.2.0": False})})
    for _ in range(3):
        check = checker(tmp_path, index)
        check.start()
        check.join(30)
    assert len(index.requests) == 1 and check.report()["source"] == "cache"
    cache = tmp_path / CACHE_NAME
    doc = json.loads(cache.read_text())
    cache.write_text(json.dumps({**doc, "checked_at": doc["checked_at"] - 2 * 86400}))
    check = checker(tmp_path, index)
    check.start()
    check.join(30)
    assert len(index.requests) == 2 and check.report()["source"] == "index"
    upgraded = checker(tmp_path, index, running="0.2.0")
    upgraded.start()
    upgraded.join(30)
    assert len(index.requests) == 3 and upgraded.report()["state"] == "current"


def test_offline_is_one_quiet_line_and_no_file(tmp_path, caplog):
    check = checker(tmp_path, "http://127.0.0.1:9/pypi")
    with caplog.at_level("INFO", logger="cpersona.updates"):
        check.start()
        check.join(30)
    lines = [r for r in caplog.records if r.name == "cpersona.updates"]
    assert len(lines) == 1 and lines[0].levelname == "INFO" and "unreachable" in lines[0].getMessage()
    assert not (tmp_path / CACHE_NAME).exists() and check.report()["state"] == "unknown"


# -------------------------------------------------------------------- apply
def test_apply_installs_exactly_this_distribution_at_the_offered_version(tmp_path, index_factory):
    index = index_factory({DISTRIBUTION: project(DISTRIBUTION, {"0.1.0": False, "0.2.0": False})})
    calls: list[list[str]] = []

    def runner(command, **kwargs):
        calls.append(command)
        assert kwargs["env"]["PIP_USER"] == "0"
        import subprocess

        return subprocess.CompletedProcess(command, 0, "Successfully installed", "")

    check = checker(tmp_path, index, runner=runner, probe=lambda _dist: None)
    assert check.report(apply=True)["ok"] is False, "no verdict yet"
    check.start()
    check.join(30)
    started = check.report(apply=True)
    assert started["install"]["state"] in ("running", "installed")
    assert wait_until(lambda: check.report().get("install", {}).get("state") == "installed")
    assert calls == [[sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
                      f"{DISTRIBUTION}==0.2.0"]]


def test_apply_refuses_when_there_is_nothing_newer_or_the_install_is_editable(tmp_path, index_factory):
    index = index_factory({DISTRIBUTION: project(DISTRIBUTION, {"0.1.0": False, "0.2.0": False})})
    current = checker(tmp_path, index, running="0.2.0", runner=lambda *a, **k: pytest.fail("pip ran"))
    current.start()
    current.join(30)
    assert "nothing to install" in current.report(apply=True)["error"]
    (tmp_path / CACHE_NAME).unlink()
    editable = checker(tmp_path, index, runner=lambda *a, **k: pytest.fail("pip ran"))
    editable.start()
    editable.join(30)
    refused = editable.report(apply=True)
    assert refused["ok"] is False
    assert "editable" in refused["error"] or "not installed" in refused["error"]


def test_install_probe_accepts_only_the_copy_in_this_environments_site_packages(monkeypatch):
    import sysconfig

    import cpersona
    from cpersona.updates.install import install_problem

    monkeypatch.setattr(cpersona, "__file__", str(Path(sysconfig.get_paths()["purelib"]) / "cpersona" / "__init__.py"))
    assert install_problem(DISTRIBUTION) is None
    assert "not installed" in install_problem("cpersona-test-not-installed")
