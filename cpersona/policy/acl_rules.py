"""What each tool demands of the caller under an ACL, and the decision for one call.

Every tool is classified in RULES; a tool missing from it is denied (a new tool is closed
until someone decides what it needs). Demands are computed from the RAW call arguments,
before any schema check, so a malformed call cannot slip past with a default: an agent
argument that is absent, empty or not a string demands the permission on `"*"` (every
agent), which needs a `"*"` grant and is met at the client's narrowest grant.

* any authenticated client: persistence_status, get_queue_status, get_operating_context,
  check_update (read-write on `*` when `apply` is truthy: it installs software);
* read-write on `*` (the whole process): pause_persistence, resume_persistence;
* read on agent_id: recall, recall_with_context, get_contents, get_profile,
  get_recall_precision, list_memories, list_episodes, traverse;
* read-write on agent_id: store, declare_associations, update_profile, archive_episode,
  update_memory, lock_memory, unlock_memory, delete_memory, delete_episode, delete_agent_data,
  calibrate_threshold, set_recall_precision, migrate_channel_axis;
* read on `*`: get_session_findings (its findings cover the whole store, every agent);
* read on agent_id, read-write when `fix` is truthy: check_health, deep_check;
* read-write on agent_id (export_memories) / target_agent_id (import_memories), and on `*`
  too while no export directory confines their file paths; import_memories also needs read
  on `*`: the export folder is shared by every client, so a file in it (another client's
  export, a database file) may hold any agent's rows, and importing it would read them;
* merge_memories: copy = read on source_agent_id + read-write on target_agent_id; any other
  mode (move) = read-write on both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cpersona.policy.acl import ANY_AGENT, AccessList, Permission

READ, READ_WRITE = Permission.READ, Permission.READ_WRITE


@dataclass(frozen=True)
class Demand:
    """One permission a call needs: `level` on `agent` (`"*"` = every agent);
    `widened` names the argument that was not a non-empty string, when that made it `"*"`."""

    agent: str
    level: Permission
    widened: str | None = None
    why: str | None = None


@dataclass(frozen=True)
class CallFacts:
    """What the rules need besides the arguments: whether file paths of export/import are
    confined to an export directory (unconfined, they reach the whole filesystem)."""

    export_confined: bool = False


#: A rule: (raw arguments, facts) → demands; an empty list = any authenticated client.
Rule = Callable[[Mapping[str, Any], CallFacts], list[Demand]]


def _agent(args: Mapping[str, Any], key: str, level: Permission) -> Demand:
    value = args.get(key)
    if isinstance(value, str) and value:
        return Demand(value, level)
    return Demand(ANY_AGENT, level, widened=key)


def _on(key: str, level: Permission) -> Rule:
    return lambda args, facts: [_agent(args, key, level)]


def _anyone(args: Mapping[str, Any], facts: CallFacts) -> list[Demand]:
    return []


def _everything(args: Mapping[str, Any], facts: CallFacts) -> list[Demand]:
    return [Demand(ANY_AGENT, READ_WRITE)]


def _fixing(args: Mapping[str, Any], facts: CallFacts) -> list[Demand]:
    return [_agent(args, "agent_id", READ_WRITE if args.get("fix") else READ)]


def _installing(args: Mapping[str, Any], facts: CallFacts) -> list[Demand]:
    return _everything(args, facts) if args.get("apply") else []


def _file(key: str) -> Rule:
    def rule(args: Mapping[str, Any], facts: CallFacts) -> list[Demand]:
        demand = _agent(args, key, READ_WRITE)
        return [demand] if facts.export_confined else [demand, Demand(ANY_AGENT, READ_WRITE)]

    return rule


#: Why import_memories needs read on every agent (see the module docstring).
_SHARED_FOLDER = "the export folder is shared by every client, so the file may hold any agent's rows"


def _importing(args: Mapping[str, Any], facts: CallFacts) -> list[Demand]:
    return [*_file("target_agent_id")(args, facts), Demand(ANY_AGENT, READ, why=_SHARED_FOLDER)]


def _whole_store(args: Mapping[str, Any], facts: CallFacts) -> list[Demand]:
    return [Demand(ANY_AGENT, READ, why="its findings cover the whole store, every agent")]


def _merge(args: Mapping[str, Any], facts: CallFacts) -> list[Demand]:
    copying = args.get("mode", "copy") == "copy"
    return [_agent(args, "source_agent_id", READ if copying else READ_WRITE),
            _agent(args, "target_agent_id", READ_WRITE)]


_READS = ("recall", "recall_with_context", "get_contents", "get_profile", "get_recall_precision",
          "list_memories", "list_episodes", "traverse")
_WRITES = ("store", "declare_associations", "update_profile", "archive_episode", "update_memory", "lock_memory",
           "unlock_memory", "delete_memory", "delete_episode", "delete_agent_data", "calibrate_threshold",
           "set_recall_precision", "migrate_channel_axis")

#: The classification of every tool (see the module docstring).
RULES: dict[str, Rule] = {
    **dict.fromkeys(("persistence_status", "get_queue_status", "get_operating_context"), _anyone),
    "check_update": _installing,
    **dict.fromkeys(("pause_persistence", "resume_persistence"), _everything),
    **dict.fromkeys(_READS, _on("agent_id", READ)),
    **dict.fromkeys(_WRITES, _on("agent_id", READ_WRITE)),
    **dict.fromkeys(("check_health", "deep_check"), _fixing),
    "get_session_findings": _whole_store,
    "export_memories": _file("agent_id"),
    "import_memories": _importing,
    "merge_memories": _merge,
}


@dataclass(frozen=True)
class Decision:
    """The verdict on one call. `denial()` is the answer the caller gets when not allowed."""

    allowed: bool
    tool: str
    client_id: str
    demand: Demand | None = None
    detail: str | None = None

    def denial(self) -> dict[str, Any]:
        """`{ok: false, error: "permission_denied", tool, client_id, agent_id?, required?, detail}`."""
        body: dict[str, Any] = {"ok": False, "error": "permission_denied", "tool": self.tool,
                                "client_id": self.client_id}
        if self.demand is not None:
            body["agent_id"] = self.demand.agent
            body["required"] = self.demand.level.label
        body["detail"] = self.detail or self._explain()
        return body

    def _explain(self) -> str:
        assert self.demand is not None
        target = "every agent ('*')" if self.demand.agent == ANY_AGENT else f"agent {self.demand.agent!r}"
        text = f"client {self.client_id!r} needs {self.demand.level.label} on {target} for {self.tool}"
        if self.demand.widened:
            text += (f"; {self.demand.widened} was absent, empty or not a string, so the call spans every agent "
                     "and needs a '*' grant")
        if self.demand.why:
            text += f": {self.demand.why}"
        return text


def decide(acl: AccessList, client_id: str | None, tool: str, args: Any, facts: CallFacts) -> Decision:
    """May `client_id` call `tool` with raw `args`? Denied when no client was resolved,
    when the client is not in the list, when the tool is unclassified, and when any demand
    exceeds the client's effective permission (the first one short is reported)."""
    if not client_id:
        return Decision(False, tool, "", detail="no authenticated client reached the access check")
    client = acl.client(client_id)
    if client is None:
        return Decision(False, tool, client_id, detail=f"client {client_id!r} is not in the ACL file")
    rule = RULES.get(tool)
    if rule is None:
        return Decision(False, tool, client_id, detail=f"tool {tool!r} has no access classification; it is denied")
    for demand in rule(args if isinstance(args, Mapping) else {}, facts):
        if client.permission(demand.agent) < demand.level:
            return Decision(False, tool, client_id, demand)
    return Decision(True, tool, client_id)
