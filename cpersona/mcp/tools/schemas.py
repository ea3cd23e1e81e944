"""Argument types shared by the tool groups: each an Annotated type whose JSON schema (type,
bounds, description) the SDK publishes and enforces before a handler runs.

The schemas are written to be cheap: every conversation pays for the whole tools list, so
an argument whose name says what it is carries no description, and the facts an agent
needs are said once, in the tool's description. Nested objects are plain JSON objects
(the service validates their fields), so no schema needs `$ref`/`$defs`.
"""

# No `from __future__ import annotations`: pydantic reads these annotations at registration.
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, StrictBool, StrictInt, StrictStr

from cpersona.policy.pause import MAX_SESSION_KEY


def _whole(value: Any) -> Any:
    """A float with no fractional part as the int it is (`1e2` → 100): JSON Schema's
    `integer` admits 100.0 and some clients write numbers that way. Anything else is left
    for the strict int check (a string, a bool or 2.5 is still refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: Put LAST in an integer argument's Annotated (after its Field: pydantic then keeps the
#: bounds as JSON Schema's minimum/maximum): a number with no fractional part is taken.
WHOLE = BeforeValidator(_whole)
#: An integer argument: a JSON integer, or a number with no fractional part (`1e2`).
WholeInt = Annotated[StrictInt, WHOLE]
AgentId = StrictStr
#: The same arguments without a description, for the tools after the first that take them
#: (the model has read it once in the tools list).
Agent = StrictStr
WriteProject = Annotated[StrictStr, Field(description="'' = global pool; '@auto' = your default project.")]
ReadProject = Annotated[StrictStr | None, Field(description="Omit = all; '' = global only; 'X' = X + global.")]
Project = StrictStr | None
WriteChannel = Annotated[StrictStr, Field(description="'' = seen from every channel.")]
ReadChannel = Annotated[StrictStr, Field(description="'' = all; 'X' = X + channel-less rows.")]
RecallLimit = Annotated[StrictInt, Field(ge=0, le=100), WHOLE]
#: list_* limits are clamped by the service (0..500 / 0..200), as the original clamps them.
ListLimit = WholeInt
Cursor = StrictStr  # a next_cursor of the previous page
SessionKey = Annotated[StrictStr, Field(max_length=MAX_SESSION_KEY)]
SourceId = Annotated[StrictStr, Field(description="Prefix of source.id.")]
Deep = Annotated[StrictBool, Field(description="Halve the gate.")]
FullContent = Annotated[StrictBool, Field(description="Whole rows, not previews.")]
Verbose = StrictBool
JsonObject = dict[str, Any]
#: A memory row: its id or its ref as recall prints it ("mem:12").
MemoryRef = Annotated[WholeInt | StrictStr, Field(description="Id or 'mem:N'.")]
EpisodeRef = Annotated[WholeInt | StrictStr, Field(description="Id or 'ep:N'.")]
Owner = Annotated[StrictStr, Field(description="'' = no owner check.")]
