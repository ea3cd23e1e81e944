"""Questions about a session itself — "what did we do last session?", 前回は何をした？,
"what was our first conversation about?".

Their answer is a session summary chosen by time, not by its words: the scope's newest
episode for the last / previous / latest session (前回, 前のセッション), its oldest for the
first one (最初のセッション). The recency prior (retrieval/recency.py) moves a fused score
by at most ±w/2, so it cannot lift a summary that shares few words with the question over
one that shares more: new users found the newest of six sessions ranked third for "What did
we do last session?" and no session at all for 前回のセッションでは何をした？. So that episode
is put first, at the best row's score, marked with the channel "session", and the gate keeps
it as it keeps an exact match; the other rows follow in their order. A time window ("last
week's meeting") is not a session reference. None of the benchmark sets holds episodes: no
set moves.
"""

from __future__ import annotations

import re

from cpersona.retrieval.candidate import PROFILE, Candidate
from cpersona.storage import Session
from cpersona.storage.records import EpisodeRow
from cpersona.storage.scope import Scope
from cpersona.util.time import parse_ts

#: The channel name a pinned session row carries (match_reason.retrievers with verbose).
CHANNEL = "session"
_NOUN = r"(session|conversation|chat|meeting|call|talk)"
_LAST = re.compile(rf"\b(last|previous|latest|most recent|prior)\s+{_NOUN}\b|\blast time (we|you|i)\b"
                   r"|前回|前のセッション|最後のセッション|直近のセッション|この前の(会話|セッション)", re.IGNORECASE)
_FIRST = re.compile(rf"\b(first|earliest|initial)\s+{_NOUN}\b|最初のセッション|初回", re.IGNORECASE)


def direction(query: str) -> int:
    """+1 when the question is about the newest session, −1 about the first, else 0."""
    return -1 if _FIRST.search(query) else 1 if _LAST.search(query) else 0


def episode(session: Session, scope: Scope, sign: int) -> EpisodeRow | None:
    """The scope's newest (sign > 0) or oldest episode by its time (start, else archived;
    parsed: stored offsets differ); equal times by id. None without a dated episode."""
    dated = [(ts, row_id) for row_id, raw in session.episodes.dated(scope) if (ts := parse_ts(raw)) is not None]
    if not dated:
        return None
    _, row_id = max(dated) if sign > 0 else min(dated)
    return session.episodes.fetch([row_id], scope).get(row_id)


def pin(rows: list[Candidate], cand: Candidate, score: str) -> list[Candidate]:
    """`cand` (or the same row already listed) first, its fused `score` raised to the best
    row's; the other rows after it in their order."""
    row = next((c for c in rows if c.key == cand.key), cand)
    best = max((getattr(c, score) or 0.0 for c in rows if c.kind != PROFILE), default=0.0)
    setattr(row, score, max(getattr(row, score) or 0.0, best))
    if CHANNEL not in row.channels:
        row.channels.append(CHANNEL)
    return [row] + [c for c in rows if c.key != row.key]
