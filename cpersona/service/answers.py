"""What a recall answers: the one place where a ranked candidate becomes the wire row, for
`recall`, `recall_with_context` and the CLI's `cpersona recall`.

A row: `content`, `ref` (`mem:<id>` / `ep:<id>`; profile rows and echoed conversation have
none), `source`, `timestamp`, `id` (the caller's msg_id), `confidence` (when confidence scoring
is on) and `match_reason` — why the row matched: `{signal, score}`, the score the ranking and
the quality gate keyed on and its name (precedence confidence > rsf > cc > cosine > rrf,
gate.signal). With `verbose` (the tool argument, or CPERSONA_RECALL_VERBOSE=true) it also
carries every channel's contribution (cosine, rrf, rsf, cc, lexical, coverage, and the
retrievers that found the row). Scores are rounded to `SCORE_DIGITS` decimals: a 16-digit
float costs ~18 bytes of context and its last 12 digits are noise below the ranking's
resolution. Library callers (verbose None) get every score unrounded.

Rows run WORST → BEST: the last row is the strongest match, because an LLM attends most to the
end of its context (the design's "final reversal").

Over MCP the rows are PREVIEWS (`previews`): a row with a `ref` whose content is longer than
CPERSONA_RECALL_PREVIEW_CHARS (0 = off) is cut to a pure prefix (no ellipsis) and marked
`content_truncated: true`, `content_len: <full length>`; get_contents expands refs
(retrieval/contents.py). `full_content=true` returns whole rows within `RECALL_BUDGET`
characters, spent from the last row backwards: the last row is always whole; once a row would
push the total past the budget, it and every row before it fall back to previews, and the
answer says so with `full_content_budget_chars`.

The answer's notes (`body`): `note` when no row came back and why, `withheld` when rows matched
but the quality gate held every one back, `gate_fallback` for the confidence rescue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cpersona.retrieval import gate
from cpersona.retrieval.candidate import Candidate
from cpersona.retrieval.pipeline import Answer
from cpersona.service.outcomes import RecallResult
from cpersona.service.requests import RecallRequest

#: Decimals kept in every score of a recall row.
SCORE_DIGITS = 4
#: match_reason keys kept without `verbose`.
SHORT_REASON = ("signal", "score")
#: The channel scores `verbose` adds to match_reason, in this order.
CHANNEL_SCORES = ("cosine", "rrf", "rsf", "cc", "lexical", "coverage")
#: Characters of whole rows a `full_content` recall may return.
RECALL_BUDGET = 200_000

#: The note of a recall whose query held only invisible (format) characters.
INVISIBLE_NOTE = "the query holds only invisible characters (such as U+200B): answered as a blank query, newest first"
#: The note of an empty answer with nothing withheld: not one row was a candidate.
NO_MATCH_NOTE = "no stored row in this scope shares a word with the query or is near enough to its meaning"
#: ... when the recall had no query vector (no backend, or it failed): meaning was not searched.
NO_WORD_MATCH_NOTE = ("no stored row in this scope shares a word with the query; without a query vector "
                      "nothing was searched by meaning")
#: Why a recall answered no row although some rows matched (retrieval/gate.py: per-row gate, answer bar).
WITHHELD_WHY = "rows matched, but none holds enough of the query's words or is near enough to its meaning"


def rounded(value: Any) -> Any:
    """`value` with every float (also inside dicts and lists) rounded to SCORE_DIGITS."""
    if isinstance(value, float):
        return round(value, SCORE_DIGITS)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def match_reason(cand: Candidate, verbose: bool | None) -> dict[str, Any] | None:
    """Why `cand` matched (module doc); None for an unscored row. `verbose` False: signal and
    score only; None: every score unrounded (library callers)."""
    sig = gate.signal(cand)
    if sig is None:
        return None
    reason: dict[str, Any] = {"signal": sig[0], "score": sig[1]}
    if verbose is not False:
        for name in CHANNEL_SCORES:
            if getattr(cand, name) is not None:
                reason[name] = getattr(cand, name)
        if cand.channels:
            reason["retrievers"] = list(dict.fromkeys(cand.channels))
    return reason if verbose is None else rounded(reason)


def message(cand: Candidate, verbose: bool | None = None) -> dict[str, Any]:
    """The wire row of one recalled candidate (module doc)."""
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
        detail = dict(cand.confidence_detail)
        msg["confidence"] = detail if verbose is None else rounded(detail)
    reason = match_reason(cand, verbose)
    if reason is not None:
        msg["match_reason"] = reason
    return msg


def messages(rows: Sequence[Candidate], verbose: bool | None = None) -> list[dict[str, Any]]:
    """The wire rows of `rows` (best first), WORST → BEST."""
    return [message(c, verbose) for c in reversed(rows)]


def body(answer: Answer, req: RecallRequest, verbose: bool | None, invisible: bool, empty_scope: bool) -> RecallResult:
    """The answer of one recall: its rows and notes (module doc). `invisible`: the query held
    only format characters; `empty_scope`: the scope holds no row at all."""
    out: RecallResult = {"messages": messages(answer.rows, verbose)}
    if not answer.rows and empty_scope:
        out["note"] = f"agent {req.agent_id!r} has no memories or episodes in this scope"
    elif invisible:
        out["note"] = INVISIBLE_NOTE
    elif not answer.rows and req.query.strip() and not answer.withheld and not req.exclude_contents:
        # (with exclusions a row may have matched and been left out on request)
        out["note"] = NO_MATCH_NOTE if answer.vectors else NO_WORD_MATCH_NOTE
    if answer.withheld:
        why = f"none of the matched rows mentions {', '.join(answer.unmentioned)}" if answer.unmentioned \
            else WITHHELD_WHY
        out["withheld"] = {"rows": answer.withheld, "why": why}
        if not req.deep:
            out["withheld"]["fix"] = "recall(deep=true) halves the bar"
    if answer.fallback:
        out["gate_fallback"] = True
    return out


def trim(msg: dict[str, Any], chars: int) -> dict[str, Any]:
    """The preview of one row (a copy; unchanged when it has no ref or is short)."""
    content = msg.get("content", "")
    if chars <= 0 or not msg.get("ref") or len(content) <= chars:
        return msg
    return {**msg, "content": content[:chars], "content_truncated": True, "content_len": len(content)}


def previews(response: dict[str, Any], preview_chars: int, full_content: bool = False) -> dict[str, Any]:
    """The preview tier (or the full-content budget) applied to a recall answer (module doc)."""
    rows = response.get("messages") or []
    if preview_chars <= 0:
        return response
    if not full_content:
        return {**response, "messages": [trim(m, preview_chars) for m in rows]}
    shaped = list(rows)
    total = 0
    exceeded = False
    for i in range(len(shaped) - 1, -1, -1):
        size = len(shaped[i].get("content", ""))
        if not exceeded and (i == len(shaped) - 1 or total + size <= RECALL_BUDGET):
            total += size
            continue
        exceeded = True
        shaped[i] = trim(shaped[i], preview_chars)
    out = {**response, "messages": shaped}
    if exceeded:
        out["full_content_budget_chars"] = RECALL_BUDGET
    return out
