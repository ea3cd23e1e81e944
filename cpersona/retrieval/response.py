"""The response row of one recalled candidate: what `recall` returns for it."""

from __future__ import annotations

from typing import Any

from cpersona.retrieval import gate
from cpersona.retrieval.candidate import Candidate


def message(cand: Candidate) -> dict[str, Any]:
    """Response row: content, ref, source, timestamp, id (msg_id), match_reason."""
    msg: dict[str, Any] = {"content": cand.content}
    if cand.ref:
        msg["ref"] = cand.ref
    if cand.source:
        msg["source"] = cand.source
    if cand.timestamp:
        msg["timestamp"] = cand.timestamp
    if cand.msg_id:
        msg["id"] = cand.msg_id
    if cand.confidence_detail is not None:
        msg["confidence"] = dict(cand.confidence_detail)
    sig = gate.signal(cand)
    if sig is not None:
        reason: dict[str, Any] = {"signal": sig[0], "score": sig[1]}
        for name in ("cosine", "rrf", "rsf", "cc", "lexical", "coverage"):
            if getattr(cand, name) is not None:
                reason[name] = getattr(cand, name)
        if cand.channels:
            reason["retrievers"] = list(dict.fromkeys(cand.channels))
        msg["match_reason"] = reason
    return msg
