"""The breadth-first walk over declared entity → entity relations (traverse; reconstruct's
walked evidence): from a set of start entities, both directions, hop by hop, in one written
order. Pure logic: the relations come from a loader the caller binds to a storage session
and a recall scope (`Associations.edges`), so a walk never follows a relation into a scope
its caller could not read.

Order, wherever a walk cuts: the relations most recently declared first (`declared_at`, then
the lower relation id); an entity is reached by the most recent relation that leads to it.
Bounds: `max_hops` caps the depth; `MAX_ENTITIES` caps the breadth — on a connected graph a
few hops reach nearly every entity, and one relation from a hub reaches all its spokes — and
where it binds, the entities the most recent relations reached are kept, the rest left
unexpanded exactly as past the hop bound (the original CPersona 2.6's neighbourhood rule).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cpersona.storage.records import Edge

#: Entities one walk expands, the starts included (above traverse's largest `limit`, 100).
MAX_ENTITIES = 256

#: The relations touching any of the given entities (both of whose ends the caller may read).
EdgeLoader = Callable[[Iterable[int]], list[Edge]]


def _recent(edge: Edge) -> tuple[str, int]:
    """Sort key: larger = more recent (later declared_at, then the lower id)."""
    return edge.declared_at, -edge.id


@dataclass
class Neighbourhood:
    """What one walk found.

    `distance`: entity → hops from the nearest start, for every entity expanded (≤ MAX_ENTITIES).
    `edges`: relation id → the relation, for every relation touching an expanded entity —
    those of the entities AT the bound too, so a caller can tell one was left unfollowed.
    """

    distance: dict[int, int] = field(default_factory=dict)
    edges: dict[int, Edge] = field(default_factory=dict)

    def recency(self) -> dict[int, int]:
        """Relation id → its position in the order most recently declared first (0 = newest)."""
        newest = sorted(self.edges.values(), key=_recent, reverse=True)
        return {edge.id: position for position, edge in enumerate(newest)}

    def order(self) -> list[int]:
        """The entities by hops, then by the most recent relation that reached them from one hop
        closer (the starts: none), then by id."""
        recency = self.recency()
        reached_by: dict[int, int] = {}
        for edge in self.edges.values():
            for near, far in ((edge.subject, edge.object), (edge.object, edge.subject)):
                if near in self.distance and self.distance.get(far) == self.distance[near] + 1:
                    reached_by[far] = min(reached_by.get(far, recency[edge.id]), recency[edge.id])
        return sorted(self.distance, key=lambda e: (self.distance[e], reached_by.get(e, -1), e))

    def unexpanded(self) -> bool:
        """Some relation leads to an entity the walk did not expand (hop or breadth bound)."""
        return any(end not in self.distance for edge in self.edges.values() for end in (edge.subject, edge.object))

    def newest_first(self, entities: set[int]) -> list[Edge]:
        """The relations with both ends in `entities`, most recently declared first."""
        return sorted((e for e in self.edges.values() if e.subject in entities and e.object in entities),
                      key=_recent, reverse=True)


def walk(starts: Iterable[int], max_hops: int, load: EdgeLoader, max_entities: int = MAX_ENTITIES) -> Neighbourhood:
    """Breadth first from `starts` over the relations `load` returns, up to `max_hops` (≥ 0)."""
    found = Neighbourhood(distance=dict.fromkeys(starts, 0))
    frontier = sorted(found.distance)
    for hop in range(max_hops + 1):
        if not frontier:
            break
        reached: dict[int, tuple[str, int]] = {}  # entity → the most recent relation reaching it
        for edge in load(frontier):
            found.edges[edge.id] = edge
            for end in (edge.subject, edge.object):
                if end not in found.distance and (end not in reached or _recent(edge) > reached[end]):
                    reached[end] = _recent(edge)
        if hop == max_hops:
            break  # the entities one hop past the bound are known; their relations are not needed
        room = max_entities - len(found.distance)
        kept = sorted(reached, key=lambda e: (reached[e], -e), reverse=True)[:max(room, 0)]
        found.distance.update(dict.fromkeys(kept, hop + 1))
        if len(kept) < len(reached):
            break
        frontier = sorted(kept)
    return found
