"""The access-control list: which client (by bearer token) may read or write which agent.

The file (CPERSONA_ACL_FILE) is JSON, exactly `{"clients": [entry, ...]}`; an entry is

    {"client_id": "alice", "token": "${ALICE_TOKEN}", "grants": {"alice": "read-write", "*": "read"}}

* `client_id` — non-empty, unique. The reserved id `local` is the stdio peer (the process
  that spawned the server); it has no token, and without a `local` entry stdio gets nothing.
* `token` — required for every other client: a literal, or `${VAR}` (the whole string) read
  from the environment at start. Tokens follow `policy/tokens.py` (ASCII, ≥ 32 characters)
  and are unique after resolution.
* `grants` — agent id (exact) or `"*"` → `none` | `read` | `read-write`.

Loading is strict: any defect refuses the start with a message naming the entry and the
rule; nothing is guessed. A file readable by group or others is only warned about.

Effective permission of a client for an agent: its exact grant when present (even when it is
lower than its `"*"` grant), else its `"*"` grant, else none. A demand on `"*"` (a call that
spans every agent) needs a `"*"` grant and is met at the MINIMUM of all the client's grants,
so a wide call never reaches further than the client's narrowest grant.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

from cpersona.errors import ConfigError
from cpersona.policy.tokens import token_problem

log = logging.getLogger(__name__)

#: The principal of the stdio transport.
LOCAL = "local"
#: The grant key that stands for every agent.
ANY_AGENT = "*"
_ENTRY_KEYS = frozenset({"client_id", "token", "grants"})
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Permission(IntEnum):
    """The lattice none < read < read-write."""

    NONE = 0
    READ = 1
    READ_WRITE = 2

    @property
    def label(self) -> str:
        return _LABELS[self]

    @classmethod
    def parse(cls, text: Any) -> Permission | None:
        return _BY_LABEL.get(text) if isinstance(text, str) else None


_LABELS = {Permission.NONE: "none", Permission.READ: "read", Permission.READ_WRITE: "read-write"}
_BY_LABEL = {label: perm for perm, label in _LABELS.items()}


@dataclass(frozen=True)
class Client:
    """One entry: its id, its token (None for `local`) and its grants."""

    client_id: str
    token: bytes | None
    grants: Mapping[str, Permission] = field(default_factory=dict)

    def permission(self, agent: str) -> Permission:
        """Effective permission on `agent` (`"*"` = a demand spanning every agent)."""
        if agent == ANY_AGENT:
            if ANY_AGENT not in self.grants:
                return Permission.NONE
            return min(self.grants.values())
        if agent in self.grants:
            return self.grants[agent]
        return self.grants.get(ANY_AGENT, Permission.NONE)


class AccessList:
    """The loaded clients. `authenticate(token)` → client id or None (constant time over
    every entry); `client(id)` → Client or None."""

    def __init__(self, clients: list[Client], source: str = "") -> None:
        self.source = source
        self._clients = {c.client_id: c for c in clients}
        self._tokens = [(c.token, c.client_id) for c in clients if c.token is not None]

    def __len__(self) -> int:
        return len(self._clients)

    def client(self, client_id: str) -> Client | None:
        return self._clients.get(client_id)

    def authenticate(self, presented: bytes) -> str | None:
        """The client whose token equals `presented`, or None. Every entry is compared
        with `hmac.compare_digest` and the loop never exits early, so the time taken does
        not tell which entry (or which prefix) came close."""
        found: str | None = None
        for token, client_id in self._tokens:
            if hmac.compare_digest(presented, token):
                found = client_id
        return found


# ------------------------------------------------------------------ loading
def load_acl(path: str, environ: Mapping[str, str] | None = None) -> AccessList:
    """Read and validate the ACL file at `path`; `${VAR}` tokens come from `environ`
    (default `os.environ`).

    Raises:
        ConfigError: one line naming the file, the entry and the broken rule.
    """
    env = os.environ if environ is None else environ
    file = Path(path).expanduser()
    where = f"CPERSONA_ACL_FILE {file}"
    try:
        raw = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{where}: cannot read: {err}") from None
    try:
        doc = json.loads(raw)
    except ValueError as err:
        raise ConfigError(f"{where}: not valid JSON: {err}") from None
    if not isinstance(doc, dict) or set(doc) != {"clients"}:
        raise ConfigError(f'{where}: the top level must be exactly {{"clients": [...]}}')
    entries = doc["clients"]
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{where}: clients must be a non-empty list")
    clients = [_client(entry, f"{where}: clients[{i}]", env) for i, entry in enumerate(entries)]
    _check_unique(clients, where)
    _warn_if_readable(file)
    return AccessList(clients, str(file))


def _client(entry: Any, where: str, env: Mapping[str, str]) -> Client:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be an object")
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: client_id, token, grants)")
    client_id = entry.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise ConfigError(f"{where}: client_id must be a non-empty string")
    where = f"{where} (client_id {client_id!r})"
    return Client(client_id, _token(entry, client_id, where, env), _grants(entry.get("grants"), where))


def _token(entry: dict, client_id: str, where: str, env: Mapping[str, str]) -> bytes | None:
    if client_id == LOCAL:
        if "token" in entry:
            raise ConfigError(f"{where}: the stdio principal 'local' takes no token")
        return None
    written = entry.get("token")
    if not isinstance(written, str) or not written:
        raise ConfigError(f"{where}: token must be a non-empty string (or ${{VAR}})")
    reference = _VAR.fullmatch(written)
    if reference is not None:
        token = env.get(reference.group(1), "")
        if not token:
            raise ConfigError(f"{where}: token {written} refers to an unset or empty environment variable")
        shown = f"token from ${{{reference.group(1)}}}"
    elif "${" in written:
        raise ConfigError(f"{where}: token may use ${{VAR}} only as the whole string")
    else:
        token, shown = written, "token"
    problem = token_problem(token)
    if problem is not None:
        raise ConfigError(f"{where}: {shown} {problem}")
    return token.encode("ascii")


def _grants(grants: Any, where: str) -> dict[str, Permission]:
    if not isinstance(grants, dict):
        raise ConfigError(f"{where}: grants must be an object of agent id → none | read | read-write")
    parsed: dict[str, Permission] = {}
    for agent, value in grants.items():
        if agent == "":
            raise ConfigError(f"{where}: grants has an empty agent id")
        perm = Permission.parse(value)
        if perm is None:
            raise ConfigError(f"{where}: grants[{agent!r}] = {value!r}; expected none, read or read-write")
        parsed[agent] = perm
    return parsed


def _check_unique(clients: list[Client], where: str) -> None:
    seen: dict[str, int] = {}
    tokens: dict[bytes, str] = {}
    for i, client in enumerate(clients):
        if client.client_id in seen:
            raise ConfigError(f"{where}: clients[{i}] repeats client_id {client.client_id!r} "
                              f"(first at clients[{seen[client.client_id]}])")
        seen[client.client_id] = i
        if client.token is not None:
            if client.token in tokens:
                raise ConfigError(f"{where}: clients[{i}] (client_id {client.client_id!r}) has the same token "
                                  f"as {tokens[client.token]!r}; every client needs its own")
            tokens[client.token] = client.client_id


def _warn_if_readable(file: Path) -> None:
    try:
        mode = file.stat().st_mode
    except OSError:
        return
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        log.warning("ACL file %s is readable by group or others (mode %o); it holds tokens: chmod 600 it",
                    file, stat.S_IMODE(mode))
