"""The rules of a declaration (declare_associations, `store(associations=…)`), before storage
is touched: the one form names are compared in, record refs, and the checks of each item.

The server extracts nothing and infers nothing: an agent (or an operator) declares entities,
their aliases and subject–predicate–object relations, and the server records them. The only
processing a declaration receives is `normalize` — NFKC, case-folded, whitespace collapsed to
one space, trimmed — which is what lookups compare: a name and an alias are kept as written
beside it, a predicate is stored normalised (`Maintains` reads back as `maintains`). Semantics
of the original CPersona 2.6 line (docs/differences.md lists where cpersona answers otherwise).

A malformed item is never a reason to refuse the rest of a call: the checks here return the
clean value or the reason it is dropped (`Dropped(item, reason)`, reported in `dropped`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: Items of one kind per call (entities, relations, retracted relations, retracted mentions),
#: aliases per entity, characters of a name, alias or predicate (the original's bounds).
MAX_ITEMS = 64
MAX_ALIASES = 32
MAX_TEXT = 256
#: Who declared: an agent through the tools, or an operator.
DECLARED_BY = ("agent", "operator")
#: The largest row id SQLite holds: a ref past it names no record.
_MAX_ID = 2**63 - 1

_WHITESPACE = re.compile(r"\s+")
_REF = re.compile(r"^(mem|ep):([0-9]+)$")


@dataclass(frozen=True)
class Dropped:
    """An item of a call left out, and why (`{item, reason}` in the answer)."""

    item: str
    reason: str

    def body(self) -> dict[str, str]:
        return {"item": self.item, "reason": self.reason}


def normalize(text: str) -> str:
    """The lookup form of a name, alias or predicate: NFKC, case-folded, whitespace runs as
    one space, trimmed (`"  Aiko\u3000TANAKA "` → `"aiko tanaka"`)."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def parse_ref(value: Any) -> tuple[str, int] | None:
    """`mem:<id>` / `ep:<id>` (surrounding whitespace allowed) → (kind, id); anything else,
    and an id past SQLite's integer range, → None."""
    if not isinstance(value, str):
        return None
    match = _REF.match(value.strip())
    if match is None:
        return None
    row_id = int(match.group(2))
    return (match.group(1), row_id) if row_id <= _MAX_ID else None


def canonical_ref(value: Any) -> str | None:
    """The one spelling of a record ref that is stored and compared (`mem:007` → `mem:7`), or None."""
    parsed = parse_ref(value)
    return None if parsed is None else f"{parsed[0]}:{parsed[1]}"


def looks_like_ref(value: Any) -> bool:
    """Shaped as a record ref, whatever its id (`mem:99999999999999999999`): never an entity name."""
    return isinstance(value, str) and _REF.match(value.strip()) is not None


def text(value: Any) -> str | None:
    """A declared name, alias or predicate: a string, trimmed, 1 … MAX_TEXT characters, no NUL,
    no lone surrogate, and something left after `normalize`; else None."""
    if not isinstance(value, str) or "\x00" in value:
        return None
    value = value.strip()
    if not value or len(value) > MAX_TEXT or not normalize(value):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


def is_id(value: Any) -> bool:
    """An integer id (JSON true/false are not) within SQLite's range."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _MAX_ID


def bounded(items: Any, name: str, dropped: list[Dropped], limit: int = MAX_ITEMS) -> Iterator[tuple[int, Any]]:
    """(index, item) of the first `limit` entries of the list `items` (None = none); once they
    are consumed, every entry past the bound is reported in `dropped` — and a value that is not
    a list at once."""
    if items is None:
        return
    if not isinstance(items, list):
        dropped.append(Dropped(name, "must be a list"))
        return
    yield from enumerate(items[:limit])
    dropped.extend(Dropped(f"{name}[{i}]", f"beyond the {limit}-item bound") for i in range(limit, len(items)))


#: Why a name, alias or predicate is dropped.
NOT_TEXT = f"must be a nonempty string of at most {MAX_TEXT} characters"


@dataclass(frozen=True)
class EntityItem:
    """One checked `entities[i]`: its name, and its `aliases` as given (each checked as it is
    attached: `alias_text`)."""

    index: int
    name: str
    aliases: Any

    @property
    def carries_aliases(self) -> bool:
        """Some alias within the bound is usable (the entity is then registered in its own scope)."""
        given = self.aliases if isinstance(self.aliases, list) else []
        return any(text(a) is not None for a in given[:MAX_ALIASES])


def entity_item(index: int, item: Any, dropped: list[Dropped]) -> EntityItem | None:
    """`entities[index]` checked; None (reported) when its name is not usable."""
    name = text(item.get("name")) if isinstance(item, dict) else None
    if name is None:
        dropped.append(Dropped(f"entities[{index}]", f"name {NOT_TEXT}"))
        return None
    return EntityItem(index, name, item.get("aliases"))


@dataclass(frozen=True)
class RelationItem:
    """One checked `relations[i]`: the predicate in its stored (normalised) form, and the
    endpoints as given (resolved against the store by the service)."""

    index: int
    subject: Any
    predicate: str
    object: Any


def relation_item(index: int, item: Any, dropped: list[Dropped]) -> RelationItem | None:
    """`relations[index]` checked (an object with a usable predicate); None when reported."""
    if not isinstance(item, dict):
        dropped.append(Dropped(f"relations[{index}]", "must be an object"))
        return None
    predicate = text(item.get("predicate"))
    if predicate is None:
        dropped.append(Dropped(f"relations[{index}]", f"predicate {NOT_TEXT}"))
        return None
    return RelationItem(index, item.get("subject"), normalize(predicate), item.get("object"))


def mention_item(index: int, item: Any, dropped: list[Dropped]) -> tuple[int, str] | None:
    """`retract.mentions[index]` = {entity: <id>, ref: 'mem:<id>'} → (entity id, canonical ref)."""
    entity = item.get("entity") if isinstance(item, dict) else None
    ref = canonical_ref(item.get("ref")) if isinstance(item, dict) else None
    if not isinstance(entity, int) or not is_id(entity) or ref is None:
        dropped.append(Dropped(f"retract.mentions[{index}]", "needs an integer entity and a record ref"))
        return None
    return entity, ref


def visible_scopes(project_id: str, channel: str) -> list[tuple[str, str]]:
    """The (project, channel) scopes whose entities a declaration in (project_id, channel)
    reuses, most specific first: per axis its own value, then the global ''."""
    projects = [project_id, ""] if project_id else [""]
    channels = [channel, ""] if channel else [""]
    return [(p, c) for p in projects for c in channels]

