"""The declared-association lines of a `cpersona-export/1.1` file — `entity`, `mention` and
`relation`, as the original CPersona 2.6 writes them (portable/exporter.py writes the same) —
read into the values of a `Graph` keyed on the file's own ids.

A field of the wrong type is a `FileDefect` naming the line and the field (nothing is
imported from the file). What a line says is checked when it is written (service/carrying.py):
a declaration naming a record or entity that did not come along is left out and counted.
"""

from __future__ import annotations

from typing import Any

from cpersona.portable.reader import FileDefect
from cpersona.storage.records import Entity, Graph, Mention, Relation

KINDS = ("entity", "mention", "relation")


def _field(obj: dict, key: str, line: int, kind: type, what: str, default: Any = None) -> Any:
    value = obj.get(key, default)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        name = {str: "a string", int: "an integer", list: "a list"}[kind]
        raise FileDefect(f"{what}.{key} must be {name}, got {type(value).__name__}", line)
    return value


def _text(obj: dict, key: str, line: int, what: str, default: str | None = "") -> str:
    return str(_field(obj, key, line, str, what, default))


def _entity(obj: dict, line: int, agent: str) -> Entity:
    aliases = _field(obj, "aliases", line, list, "entity", [])
    if not all(isinstance(a, str) for a in aliases):
        raise FileDefect("entity.aliases must be a list of strings", line)
    return Entity(_field(obj, "id", line, int, "entity"), agent or _text(obj, "agent_id", line, "entity", None),
                  _text(obj, "project_id", line, "entity"), _text(obj, "channel", line, "entity"),
                  _text(obj, "name", line, "entity", None), _text(obj, "declared_by", line, "entity", "agent"),
                  _text(obj, "created_at", line, "entity"), tuple(aliases))


def _mention(obj: dict, line: int) -> Mention:
    return Mention(_field(obj, "entity", line, int, "mention"), _text(obj, "ref", line, "mention", None),
                   _text(obj, "declared_by", line, "mention", "agent"), _text(obj, "created_at", line, "mention"))


def _relation(obj: dict, line: int, agent: str) -> Relation:
    ints = {k: _field(obj, k, line, int, "relation") for k in ("id", "subject_id", "object_id")}
    texts = {k: _text(obj, k, line, "relation") for k in ("project_id", "channel", "anchor_ref", "declared_at")}
    kinds = {k: _text(obj, k, line, "relation", None) for k in ("subject_kind", "predicate", "object_kind")}
    return Relation(ints["id"], agent or _text(obj, "agent_id", line, "relation", None), texts["project_id"],
                    texts["channel"], kinds["subject_kind"], ints["subject_id"], kinds["predicate"],
                    kinds["object_kind"], ints["object_id"], texts["anchor_ref"],
                    _text(obj, "declared_by", line, "relation", "agent"), texts["declared_at"])


def add(graph: Graph, kind: str, obj: dict, line: int, agent: str) -> None:
    """Read one `kind` line into `graph`; `agent` (when not '') replaces its agent_id.
    Raises FileDefect."""
    if kind == "entity":
        entity = _entity(obj, line, agent)
        if entity.id in graph.entities:
            raise FileDefect(f"a second entity line with id {entity.id}", line)
        graph.entities[entity.id] = entity
    elif kind == "mention":
        graph.mentions.append(_mention(obj, line))
    else:
        graph.relations.append(_relation(obj, line, agent))
