"""The read rule of the isolation axes as an oracle for tests and benchmarks, written
independently of the server's own predicate (`storage/scope.py`), so the two check each other."""

from __future__ import annotations


def visible(row: tuple[str, str, str], agent: str, project: str | None, channel: str, agent_all: bool = False) -> bool:
    """Whether a row stored as (agent, project, channel) is visible to a reader.

    The reader sees its own agent's rows only (every agent's with `agent_all`); with a
    project (None = every project) only that project's rows and the global pool ''; with a
    channel only that channel's rows and the channel-less ones ('' = every channel)."""
    a, p, c = row
    if not agent_all and a != agent:
        return False
    if project is not None and p not in (project, ""):
        return False
    return not channel or c in (channel, "")
