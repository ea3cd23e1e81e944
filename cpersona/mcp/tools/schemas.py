"""Argument types shared by the tool groups: each an Annotated type whose JSON schema (type,
bounds, description) the SDK publishes and enforces before a handler runs."""

# No `from __future__ import annotations`: pydantic reads these annotations at registration.
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from cpersona.retrieval.preview import RECALL_BUDGET

AgentId = Annotated[
    StrictStr,
    Field(description="Whose memory this is. Rows are never shared between agent ids; '' is a real (empty) agent id."),
]
WriteProject = Annotated[
    StrictStr,
    Field(description="Project bucket to write into; '' (default) = the global pool visible from every project; "
                      "'@auto' = your default project from the operating context."),
]
ReadProject = Annotated[
    StrictStr | None,
    Field(description="Omit = all projects; '' = global pool only; 'X' = project X plus the global pool; "
                      "'@auto' = your default project from the operating context."),
]
WriteChannel = Annotated[
    StrictStr, Field(description="Channel to file under; '' (default) = visible from every channel.")
]
ReadChannel = Annotated[
    StrictStr, Field(description="'' (default) = all channels; 'X' = channel X plus channel-less rows.")
]
RecallLimit = Annotated[
    StrictInt,
    Field(ge=1, le=100, description="Maximum rows returned (1–100, default 10); also each retriever's depth."),
]


class StoreMessage(BaseModel):
    """The memory to keep."""

    model_config = ConfigDict(extra="ignore")

    content: StrictStr = Field(
        description="The fact, decision or rule to remember (non-empty; ≤16000 chars by default)."
    )
    id: StrictStr = Field("", description="Your message id; a second store with the same id is skipped (dedup).")
    source: dict[str, Any] = Field(
        default_factory=dict,
        description='Who said it: {"type": "User"|"Agent"|"System", "id": "...", "name": "..."}.',
    )
    timestamp: StrictStr = Field("", description="When it was said, ISO-8601 (e.g. 2026-11-29T10:00:00Z); default now.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form JSON object kept with the memory.")


class HistoryEntry(BaseModel):
    """One turn of the summarised session; only `timestamp` is used (start/end time)."""

    model_config = ConfigDict(extra="allow")

    timestamp: StrictStr = Field("", description="ISO-8601 time of this turn.")


FULL_CONTENT_HELP = (
    f"Return whole rows instead of previews, within {RECALL_BUDGET:,} characters spent on the best rows first; "
    "weaker rows past the budget stay previews (full_content_budget_chars is then set)."
)
SourceId = Annotated[StrictStr, Field(description="Only memories whose source.id starts with this prefix.")]
Deep = Annotated[StrictBool, Field(description="Search harder: halves the quality gate.")]
FullContent = Annotated[StrictBool, Field(description=FULL_CONTENT_HELP)]
