"""What a caller asks of recall: `RecallRequest`, the tool's arguments as the edges (the MCP
tools, the CLI) pass them. The service validates it and turns it into the pipeline's
`Question` (retrieval/plan.py)."""

from __future__ import annotations

from dataclasses import dataclass

from cpersona.retrieval.plan import Question, exclusions
from cpersona.storage.scope import Scope


@dataclass(frozen=True)
class RecallRequest:
    """Arguments of one recall (validated by the service: service/recall.py).

    limit is the per-retriever depth AND the response cap (0..100; 0 answers no rows).
    """

    agent_id: str
    query: str
    limit: int = 10
    deep: bool = False
    channel: str = ""
    project_id: str | None = None
    source_id: str = ""
    exclude_contents: tuple[str, ...] = ()

    @property
    def scope(self) -> Scope:
        return Scope(self.agent_id, self.project_id, self.channel or None)

    def question(self) -> Question:
        """The pipeline's question of this (validated) request."""
        return Question(self.scope, self.query, self.limit, self.deep, self.source_id,
                        exclusions(self.exclude_contents))
