"""The report behind `cpersona checkup`: check_health on a database file, and with `deep`
deep_check of every agent (or the one asked for).

Report-only (the default) never writes: the file must exist, it is opened read-only as
it is — no migration, no journal-mode change, no file created — and the only statement
SQLite treats as a write, FTS5's 'integrity-check', runs in a transaction that is always
rolled back. With `fix` the file is opened like the server opens it (migrated) and
repaired. The no-persist pause of a running server does not apply here (it belongs to
that process).
"""

from __future__ import annotations

from typing import Any

from cpersona.config import Settings
from cpersona.embedding.base import Embedder
from cpersona.embedding.provider import build_embedder
from cpersona.health import HealthEnv, check_health, deep_check
from cpersona.policy.projects import OperatingContext
from cpersona.service.engine import Engine
from cpersona.storage.backend import open_read_only

#: Seconds to wait for a bundled embedding model to load before probing it.
MODEL_WAIT_SECONDS = 120.0


def _wait_for_model(embedder: Embedder | None) -> None:
    """Start loading a bundled model and wait for it (an HTTP backend is always ready)."""
    wait = getattr(embedder, "wait_ready", None)
    if wait is not None:
        wait(MODEL_WAIT_SECONDS)


def _agents(env: HealthEnv, agent: str) -> list[str]:
    if agent:
        return [agent]
    with env.db.read() as s:
        return s.inventory.memory_agents()


#: What a checkup says of its deep findings when it repaired the store (`--fix`).
DEEP_NOT_FIXED = ("deep findings are reported, never acted on, by a checkup: they are about what the agent "
                  "wrote (deep_check(agent_id, fix=true) over MCP deletes short_content rows and names "
                  "anonymous_source speakers)")


def _report(env: HealthEnv, agent: str, fix: bool, deep: bool) -> dict[str, Any]:
    """check_health (repairing with `fix`) and, with `deep`, each agent's deep_check — always
    report-only: its fixes delete or rewrite rows the agent wrote (a memory of four CJK
    characters is a whole fact; short_content would delete it), which a store repair must not."""
    report = check_health(env, agent, fix)
    if deep:
        report["deep"] = {a: deep_check(env, a, False) for a in _agents(env, agent)}
        if fix:
            report["deep_not_fixed"] = DEEP_NOT_FIXED
    return report


def run_checkup(settings: Settings, agent: str = "", fix: bool = False, deep: bool = False) -> dict[str, Any]:
    """check_health (+ `deep`: {agent: deep_check}) of `settings.db_path`.

    Raises StorageError (file missing, unreadable, newer schema when fixing), ConfigError
    (the embedding backend cannot be built)."""
    if fix:
        engine = Engine(settings, start_background=False)
        try:
            _wait_for_model(engine.embedder)
            report = _report(engine.health.health_env(), agent, True, deep)
            if engine.damage:
                report["database_damage"] = engine.damage
            return report
        finally:
            engine.close()
    db = open_read_only(settings.db_path, settings.fts_enabled)
    embedder = None
    try:
        embedder = build_embedder(settings)
        _wait_for_model(embedder)
        env = HealthEnv(settings, db, embedder, operating_context=OperatingContext.from_settings(settings))
        return _report(env, agent, False, deep)
    finally:
        if embedder is not None:
            embedder.close()
        db.close()
