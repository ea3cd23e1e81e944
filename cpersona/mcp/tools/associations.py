"""MCP tools of declared associations: declare_associations (entities, aliases, relations an
agent declares; `retract` removes them) and traverse (an entity's declared neighbourhood).
`store` takes the same object as `associations` (mcp/tools/memory.py). The object's items are
checked by the service, item by item (a malformed one is reported in `dropped`, never a
reason to refuse the call), so the schema declares it a plain object."""

# No `from __future__ import annotations`: pydantic reads these annotations at registration.
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field, StrictInt, StrictStr

from cpersona.mcp.registry import DELETE, READ, add_tools
from cpersona.mcp.results import call
from cpersona.mcp.tools.schemas import WHOLE, Agent, JsonObject, Project, SessionKey
from cpersona.service.engine import Engine
from cpersona.service.graph import MAX_HOPS, MAX_LIMIT

#: store's and declare_associations' `associations` (store adds that the new memory anchors it).
ASSOCIATIONS = "{entities: [{name, aliases?}], relations: [{subject, predicate, object}]}; ends: name or 'mem:N'"
RETRACT = "{relations: [ids], mentions: [{entity, ref}]}"
#: The failure keys of declare_associations (its answers always carry `result`).
_FAILED = {"result": "rejected", "entities": [], "mentions": 0, "relations": [], "dropped": []}


def register(app: MCPServer, engine: Engine) -> None:
    """Add declare_associations and traverse to `app`, bound to `engine`."""

    def declare_associations(
        agent_id: Agent,
        associations: Annotated[JsonObject | None, Field(description=ASSOCIATIONS)] = None,
        anchor_ref: StrictStr = "",
        retract: Annotated[JsonObject | None, Field(description=RETRACT)] = None,
        channel: StrictStr = "",
        project_id: StrictStr = "",
        session_key: SessionKey = "",
    ) -> str:
        """Record entities, aliases, relations (nothing inferred); anchor_ref: the record they rest on. Bad
        items → dropped."""
        return call("declare_associations", lambda: engine.declare_associations(
            agent_id, associations, anchor_ref, retract, channel, project_id), _FAILED, session_key)

    def traverse(
        agent_id: Agent,
        entity: StrictStr,
        max_hops: Annotated[StrictInt, Field(ge=0, le=MAX_HOPS), WHOLE] = 1,
        limit: Annotated[StrictInt, Field(ge=1, le=MAX_LIMIT), WHOLE] = 20,
        channel: StrictStr = "",
        project_id: Project = None,
        source_id: StrictStr = "",
    ) -> str:
        """Declared neighbourhood of an entity (name/alias): entities by hops, aliases, mentioning refs;
        relations."""
        return call("traverse", lambda: engine.traverse(agent_id, entity, max_hops, limit, channel, project_id,
                                                        source_id), {"entities": [], "relations": []})

    add_tools(app, ((declare_associations, DELETE), (traverse, READ)))
