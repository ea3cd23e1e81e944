"""Operating context: an operator-owned TOML file beside the memory, and the project_id
policy it defines for the six project_id tools (store, archive_episode, recall,
recall_with_context, list_memories, list_episodes).

    ~/.cpersona/operating-context.toml   (CPERSONA_OPERATING_CONTEXT_PATH overrides;
                                          CPERSONA_OPERATING_CONTEXT=off disables)

    version = 1                           # required, must be 1
    context_revision = "2026-06-r3"       # optional label echoed in responses and warnings
    [instructions]
    summary = "..."                       # sent as the MCP `instructions` (read at start)
    [registry]
    project_ids = ["", "ops", "web"]      # the valid project ids
    enforce = "warn"                      # off | warn (default) | reject
    [defaults]
    kai = "ops"                           # agent_id → project_id, used to resolve "@auto"
    [paths]
    "~/src/web" = "web"                   # working directory → project_id (host hooks, `cpersona
                                          # context`): the longest folder that holds it wins
    [[doctrine]]
    name = "release"                      # unique, non-empty
    body = "..."                          # served by get_operating_context(section="release")

Types are checked strictly (unknown keys are ignored). A missing, disabled or invalid file
leaves the feature dormant: tools behave as if it did not exist, and an invalid file is
reported by get_operating_context (`ok: false` with the parse error) and logged once as a
warning — the server still starts. The file is re-read when its path or mtime changes.

The gate (`OperatingContext.gate`) applies to the six project_id tools: "@auto" becomes the
agent's default project; a project id outside the registry gets a warning (or, for writes in
`reject` mode, a refusal). Explicit values are never rewritten; reads are never refused.
When no `[registry]` table declares `project_ids`, no registry check is made.
"""

from __future__ import annotations

import logging
import os
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cpersona.config import Settings
from cpersona.errors import ContextError

log = logging.getLogger(__name__)

AUTO = "@auto"
DEFAULT_PATH = "~/.cpersona/operating-context.toml"
ENFORCE_MODES = ("off", "warn", "reject")


@dataclass(frozen=True)
class Context:
    """A parsed, valid sidecar."""

    revision: str | None
    summary: str
    project_ids: tuple[str, ...] | None  # None = no registry declared
    enforce: str
    defaults: dict[str, str]
    doctrine: dict[str, str]
    #: (absolute folder, project id), longest folder first
    paths: tuple[tuple[str, str], ...] = ()


@dataclass
class Gate:
    """Outcome of the project_id gate for one call. `project_id` is the resolved project, or
    the caller's argument unchanged (any value: the tool validates it after the gate)."""

    project_id: object
    extras: dict[str, Any] = field(default_factory=dict)
    refusal: str | None = None
    revision: str | None = None

    def refused(self, failure: dict[str, Any]) -> dict[str, Any]:
        """The refusal body: {ok: false, error, operating_context_revision} + the tool's keys."""
        return {"ok": False, "error": self.refusal, "operating_context_revision": self.revision, **failure}


def parse(text: str, where: str) -> Context:
    """Parse and check the sidecar text. Raises ContextError naming the offending key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ContextError(f"{where}: not valid TOML: {err}") from None
    except RecursionError:
        raise ContextError(f"{where}: nested too deeply to be an operating context") from None

    def bad(key: str, rule: str) -> ContextError:
        return ContextError(f"{where}: {key} {rule}")

    version = data.get("version")
    if isinstance(version, bool) or version != 1:
        raise bad("version", f"must be the integer 1 (got {version!r})")
    revision = data.get("context_revision")
    if revision is not None and not isinstance(revision, str):
        raise bad("context_revision", "must be a string")

    def table(name: str) -> dict:
        value = data.get(name, {})
        if not isinstance(value, dict):
            raise bad(f"[{name}]", "must be a table")
        return value

    summary = table("instructions").get("summary", "")
    if not isinstance(summary, str):
        raise bad("instructions.summary", "must be a string")

    registry = table("registry")
    project_ids = registry.get("project_ids")
    if project_ids is not None:
        if not isinstance(project_ids, list) or not all(isinstance(p, str) for p in project_ids):
            raise bad("registry.project_ids", "must be a list of strings")
        project_ids = tuple(project_ids)
    enforce = registry.get("enforce", "warn")
    if enforce not in ENFORCE_MODES:
        raise bad("registry.enforce", f"must be one of {', '.join(ENFORCE_MODES)} (got {enforce!r})")

    defaults = table("defaults")
    for agent, project in defaults.items():
        if not isinstance(project, str):
            raise bad(f"defaults.{agent}", "must be a string (a project id)")

    paths = []
    for folder, project in table("paths").items():
        if not isinstance(project, str):
            raise bad(f"paths.{folder}", "must be a string (a project id)")
        paths.append((os.path.normpath(os.path.abspath(os.path.expanduser(folder))), project))
    paths.sort(key=lambda entry: len(entry[0]), reverse=True)

    doctrine: dict[str, str] = {}
    entries = data.get("doctrine", [])
    if not isinstance(entries, list):
        raise bad("[[doctrine]]", "must be an array of tables")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise bad(f"doctrine[{i}]", "must be a table")
        name, body = entry.get("name"), entry.get("body", "")
        if not isinstance(name, str) or not name.strip():
            raise bad(f"doctrine[{i}].name", "must be a non-empty string")
        if not isinstance(body, str):
            raise bad(f"doctrine[{i}].body", "must be a string")
        if name in doctrine:
            raise bad(f"doctrine[{i}].name", f"{name!r} is used twice")
        doctrine[name] = body
    return Context(revision, summary, project_ids, enforce, dict(defaults), doctrine, tuple(paths))


class OperatingContext:
    """The sidecar as seen by this process: lazily (re)parsed, thread-safe.

    Args:
        path: sidecar path ('' = ~/.cpersona/operating-context.toml).
        enabled: False = kill switch (CPERSONA_OPERATING_CONTEXT=off).
    """

    def __init__(self, path: str = "", enabled: bool = True) -> None:
        self.path = Path(os.path.expanduser(path or DEFAULT_PATH))
        self.enabled = enabled
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._context: Context | None = None
        self._why = ""
        self._logged: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> OperatingContext:
        return cls(settings.operating_context_path, settings.operating_context != "off")

    def current(self) -> tuple[Context | None, str]:
        """(context, "") when active, else (None, why it is dormant)."""
        if not self.enabled:
            return None, "disabled by kill switch (CPERSONA_OPERATING_CONTEXT=off)"
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return None, f"no sidecar file at {self.path}"
        except OSError as err:
            return None, f"sidecar unusable: {self.path}: {err}"
        key = (str(self.path), stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if key != self._key:
                self._key = key
                try:
                    self._context, self._why = parse(self.path.read_text(encoding="utf-8"), str(self.path)), ""
                except (ContextError, OSError, UnicodeDecodeError) as err:
                    self._context, self._why = None, f"sidecar unusable: {err}"
                    if self._logged != self._why:  # one warning per distinct problem
                        self._logged = self._why
                        log.warning("operating context is dormant — %s", self._why)
            return self._context, self._why

    def instructions(self) -> str | None:
        """The non-blank `[instructions] summary`, or None."""
        ctx, _ = self.current()
        return ctx.summary if ctx is not None and ctx.summary.strip() else None

    def project_for_dir(self, directory: str, agent_id: str) -> str | None:
        """The project of a working directory: the `[paths]` entry of the longest folder that
        holds `directory`, else the agent's `[defaults]` entry; None when neither names one
        (or the context is dormant)."""
        ctx, _ = self.current()
        if ctx is None:
            return None
        where = os.path.normpath(os.path.abspath(os.path.expanduser(directory))) if directory else ""
        for folder, project in ctx.paths:
            if where == folder or where.startswith(folder.rstrip(os.sep) + os.sep):
                return project
        return ctx.defaults.get(agent_id)

    def describe(self, section: str = "") -> dict[str, Any]:
        """Body of get_operating_context: the overview, or one doctrine section."""
        ctx, why = self.current()
        if ctx is None:
            return {"ok": False, "enabled": False, "error": f"operating context is dormant — {why}"}
        sections = sorted(ctx.doctrine)
        if not section:
            return {
                "ok": True,
                "context_revision": ctx.revision,
                "instructions_summary": ctx.summary,
                "registry": {"project_ids": list(ctx.project_ids or []), "enforce": ctx.enforce},
                "defaults": dict(ctx.defaults),
                "doctrine_sections": sections,
            }
        if section not in ctx.doctrine:
            return {"ok": False, "error": f"unknown doctrine section {section!r}", "doctrine_sections": sections}
        return {"ok": True, "context_revision": ctx.revision, "section": section, "body": ctx.doctrine[section]}

    def gate(self, agent_id: object, project_id: object, write: bool) -> Gate:
        """Resolve "@auto" and check the registry for one call of a project_id tool (the
        arguments as the caller sent them: they are validated by the tool afterwards)."""
        ctx, why = self.current()
        if ctx is None and project_id == AUTO:
            # Dormant context: "@auto" cannot be resolved. Storing or filtering the literal
            # "@auto" would file rows under a project nobody means (the earlier system did
            # so silently); use the global pool and say why.
            warning = f"project_id '@auto' needs an operating context ({why}); using the global pool ''"
            return Gate("", {"resolved_project_id": "", "operating_context_warning": warning})
        if ctx is None or project_id is None or project_id == "":
            return Gate(project_id, {})
        rev = ctx.revision
        out = Gate(project_id, revision=rev)
        label = f" (rev {rev})" if rev else ""
        if project_id == AUTO:
            mapped = ctx.defaults.get(agent_id) if isinstance(agent_id, str) else None
            if mapped is None:
                if ctx.enforce == "reject" and write:
                    out.refusal = f"project_id '@auto': no default project for agent {agent_id!r} in [defaults]{label}"
                    return out
                if ctx.enforce != "off":
                    out.extras["operating_context_warning"] = (
                        f"project_id '@auto': no default project for agent {agent_id!r}{label}; "
                        "using the global pool ''"
                    )
                mapped = ""
            out.project_id = mapped
            out.extras["resolved_project_id"] = mapped
            if mapped == "":
                return out
        if ctx.enforce != "off" and ctx.project_ids is not None and out.project_id not in ctx.project_ids:
            message = f"project_id {out.project_id!r} not in registry{label}"
            if ctx.enforce == "reject" and write:
                out.refusal = message + "; registered: " + ", ".join(repr(p) for p in ctx.project_ids)
            else:
                out.extras["operating_context_warning"] = message
        return out
