"""Questions about a session itself — "what did we do last session?", 前回は何をした？,
"what was our first conversation about?".

Their answer is a session summary chosen by time, not by its words: the scope's newest
episode for the last / previous / latest session (前回, 前のセッション), its oldest for the
first one (最初のセッション). The recency prior (retrieval/recency.py) moves a fused score
by at most ±w/2, so it cannot lift a summary that shares few words with the question over
one that shares more: new users found the newest of six sessions ranked third for "What did
we do last session?" and no session at all for 前回のセッションでは何をした？. So that episode
is put first, at the best row's score, marked with the channel "session", and the gate keeps
it as it keeps an exact match; the other rows follow in their order. Only a conversation
counts — "last session / conversation / chat", "last time we talked", "what did we work on last
time", "where we left off", 前回の会話, 前回は何を…;
not a time window ("last week"), a call, a talk or a value (前回の値), which a tester found
pinned an unrelated summary. None of the benchmark sets holds episodes: no set moves.
"""

from __future__ import annotations

import re
import time

from cpersona.retrieval.candidate import PROFILE, Candidate
from cpersona.storage import Session
from cpersona.storage.records import EpisodeRow
from cpersona.storage.scope import Scope
from cpersona.util.time import parse_ts

#: The channel name a pinned session row carries (match_reason.retrievers with verbose).
CHANNEL = "session"
#: A conversation with the agent (not a phone call, a talk at a conference or a meeting of people).
_NOUN = r"(session|conversation|chat)"
_LAST = re.compile(rf"\b(last|previous|latest|most recent|prior)\s+{_NOUN}\b"
                   r"|\blast time (we|you and i) (talked|spoke|chatted)\b"
                   r"|\b(did|were) (we|you and i) (do|doing|discuss|discussing|talk|talking|chat|work|working|decide|"
                   r"agree|plan|cover|go over)\b[^?.!]*\blast time\b|\bwhere (did )?we (leave|left) off\b"
                   r"|前回(の)?(セッション|会話)|前回(は|に)?何を|前の(セッション|会話)|最後の(セッション|会話)"
                   r"|直近の(セッション|会話)|この前の(セッション|会話)", re.IGNORECASE)
_FIRST = re.compile(rf"\b(first|earliest|initial)\s+{_NOUN}\b|最初の(セッション|会話)|初回の(セッション|会話)",
                    re.IGNORECASE)
#: An episode dated further ahead than this (seconds) is a wrong clock, not the last session.
FUTURE_SLACK_S = 86400.0


def direction(query: str) -> int:
    """+1 when the question is about the newest session, −1 about the first, else 0 (also
    when it names both: "compare our first session with the last one" needs both)."""
    last, first = bool(_LAST.search(query)), bool(_FIRST.search(query))
    return 0 if last == first else 1 if last else -1


def episode(session: Session, scope: Scope, sign: int) -> EpisodeRow | None:
    """The scope's newest (sign > 0) or oldest episode by its time (start, else archived;
    parsed: stored offsets differ; one dated more than a day ahead is left out); equal times
    by id. None without a dated episode."""
    latest = time.time() + FUTURE_SLACK_S
    dated = [(ts, row_id) for row_id, raw in session.episodes.dated(scope)
             if (ts := parse_ts(raw)) is not None and ts.timestamp() <= latest]
    if not dated:
        return None
    _, row_id = max(dated) if sign > 0 else min(dated)
    return session.episodes.fetch([row_id], scope).get(row_id)


#: A pinned summary's least score in the modes whose scores are read as 0..1 (cc, rsf): a full
#: match — it answers the question by what it is, and a new user's agent took the 0.0 it had
#: when no other row matched ("what did we do last session?") for "irrelevant".
FLOOR = {"cc": 1.0, "rsf": 1.0}


def pin(rows: list[Candidate], cand: Candidate, score: str) -> list[Candidate]:
    """`cand` (or the same row already listed) first, its fused `score` raised to the best
    row's and at least `FLOOR`; the other rows after it in their order."""
    row = next((c for c in rows if c.key == cand.key), cand)
    best = max((getattr(c, score) or 0.0 for c in rows if c.kind != PROFILE), default=0.0)
    setattr(row, score, max(getattr(row, score) or 0.0, best, FLOOR.get(score, 0.0)))
    if CHANNEL not in row.channels:
        row.channels.append(CHANNEL)
    return [row] + [c for c in rows if c.key != row.key]
