"""The row that flows through the recall pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MEMORY, EPISODE, PROFILE = "mem", "ep", "profile"


@dataclass
class Candidate:
    """One recall candidate.

    `kind` + `id` is the identity (memory and episode ids are separate spaces). Scores are
    None until a stage sets them: `cosine` (vector retriever), `bm25` (FTS; lower = better,
    SQLite convention), `rrf` / `rsf` / `cc` (fusion); `lexical` is the keyword evidence on
    a 0..1 scale used by cc (bm25 / the query's best bm25; 1.0 for a LIKE substring hit).
    `word_bm25` is the bm25 of the word index and `coverage` the share of the query's word
    information the row holds (retrieval/lexical.py).
    `penalty` is the product of multiplicative penalties already applied to the scores. With
    confidence scoring on (retrieval/confidence.py) `confidence` is the score the gate keys on
    and `confidence_detail` its response object; `backfilled` marks a cosine computed after
    fusion for a keyword-only row.
    """

    kind: str
    id: int
    content: str
    timestamp: str = ""
    created_at: str = ""
    source: Any = None
    msg_id: str = ""
    resolved: bool = False
    cosine: float | None = None
    bm25: float | None = None
    word_bm25: float | None = None
    coverage: float | None = None
    rrf: float | None = None
    rsf: float | None = None
    cc: float | None = None
    lexical: float | None = None
    penalty: float = 1.0
    channels: list[str] = field(default_factory=list)
    confidence: float | None = None
    confidence_detail: dict[str, Any] | None = None
    backfilled: bool = False

    @property
    def key(self) -> tuple[str, int]:
        return (self.kind, self.id)

    @property
    def ref(self) -> str | None:
        return f"{self.kind}:{self.id}" if self.kind in (MEMORY, EPISODE) else None
