"""Compact answers: what a recall row says about why it matched, at the size an agent's
context can afford.

By default a row's `match_reason` is `{signal, score}` — the score the ranking and the
quality gate keyed on, and its name. With `verbose` (the tool argument, or
CPERSONA_RECALL_VERBOSE=true) it also carries every channel's contribution (cosine,
lexical, cc, rrf, rsf, the retrievers that found the row). Scores are rounded to
`SCORE_DIGITS` decimals either way: a 16-digit float costs ~18 bytes of context and its
last 12 digits are noise below the ranking's resolution.
"""

from __future__ import annotations

from typing import Any

#: Decimals kept in every score of a recall row.
SCORE_DIGITS = 4
#: match_reason keys kept without `verbose`.
SHORT_REASON = ("signal", "score")


def rounded(value: Any) -> Any:
    """`value` with every float (also inside dicts and lists) rounded to SCORE_DIGITS."""
    if isinstance(value, float):
        return round(value, SCORE_DIGITS)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def compact_row(msg: dict[str, Any], verbose: bool) -> dict[str, Any]:
    """One recall message with rounded scores and, unless `verbose`, the short match_reason."""
    reason = msg.get("match_reason")
    confidence = msg.get("confidence")
    if reason is None and confidence is None:
        return msg
    out = dict(msg)
    if reason is not None:
        out["match_reason"] = rounded(reason if verbose else {k: reason[k] for k in SHORT_REASON if k in reason})
    if confidence is not None:
        out["confidence"] = rounded(confidence)
    return out


def compact_recall(response: dict[str, Any], verbose: bool) -> dict[str, Any]:
    """A recall / recall_with_context answer with every message compacted (a copy)."""
    messages = response.get("messages")
    if not messages:
        return response
    return {**response, "messages": [compact_row(m, verbose) for m in messages]}
