"""Time-aware ranking: a question that asks for the newest ("what did we decide most
recently", "the latest version", "last session", 最新, 前回) or the oldest ("when did we first
meet", 最初) of something gets a recency (or age) prior on its candidates.

Among the candidates with a parseable time (memory timestamp, episode start), each row's
place in time r ∈ [0, 1] (0 = oldest, 1 = newest candidate) scales its fused score by
1 + w·(r − ½) — newest first for "latest" questions, `1 − r` for "first" ones — so the
prior reorders rows of similar strength but cannot lift a weak row over a clearly better
one (at most ± w/2; w = CPERSONA_RECENCY_WEIGHT, default 0.2). Rows without a time keep
their score. The episode boundary penalty is applied afterwards, as designed.
"""

from __future__ import annotations

import re

from cpersona.retrieval.candidate import PROFILE, Candidate
from cpersona.util.time import parse_ts

#: Default weight (CPERSONA_RECENCY_WEIGHT): the largest relative change of a fused score is ± weight / 2.
WEIGHT = 0.2
_CALENDAR = r"(week|weekend|month|year|night|summer|winter|spring|fall|autumn|monday|tuesday|" \
    r"wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june|july|august|september|" \
    r"october|november|december)"
_LATEST = re.compile(
    rf"\b(latest|last(?!\s+{_CALENDAR})|lately|most recent(ly)?|newest|recent(ly)?|current(ly)?|now|nowadays"
    r"|these days)\b|最新|最近|最後|前回|直近|現在|今",
    re.IGNORECASE,
)
_FIRST = re.compile(r"\b(first time|at first|earliest|initially|originally|oldest)\b|\bwhen\b.*\bfirst\b"
                    r"|最初|初めて|初回|当初", re.IGNORECASE)
#: "Which happened first, A or B?" compares two rows: both are needed, no prior.
_CHOICE = re.compile(r",?\s(or|vs\.?|versus)\s|または|それとも|か、", re.IGNORECASE)
_SCORES = ("cc", "rrf", "rsf")
#: Word-index tokens (Snowball stems) of the words that ask for order, not content.
TIME_WORDS = frozenset({"latest", "last", "late", "recent", "newest", "current", "first", "earliest", "initi",
                        "origin", "oldest", "now", "今", "最新", "最近", "最後", "前回", "最初", "初め"})


def direction(query: str) -> int:
    """+1 when the query asks for the newest, −1 for the oldest, 0 otherwise ("first" wins
    when both appear: "the first time … last year" asks for the first). "last" followed by a
    calendar word ("last Saturday", "last month") names a time window, not the newest row;
    a choice between alternatives ("which came first, A or B?") needs both rows."""
    if _CHOICE.search(query):
        return 0
    if _FIRST.search(query):
        return -1
    return 1 if _LATEST.search(query) else 0


def apply(rows: list[Candidate], query: str, weight: float = WEIGHT) -> list[Candidate]:
    """Rows re-scored and re-sorted by the prior (module doc); unchanged for other queries."""
    sign = direction(query)
    if not sign or weight <= 0:
        return rows
    times = {c.key: ts.timestamp() for c in rows if c.kind != PROFILE and (ts := parse_ts(c.timestamp)) is not None}
    if len(times) < 2:
        return rows
    lo, hi = min(times.values()), max(times.values())
    if hi <= lo:
        return rows
    name = next((n for n in _SCORES if rows[0].__dict__.get(n) is not None), None)
    if name is None:
        return rows
    for cand in rows:
        when = times.get(cand.key)
        value = getattr(cand, name)
        if when is None or value is None:
            continue
        r = (when - lo) / (hi - lo)
        setattr(cand, name, value * (1.0 + weight * ((r if sign > 0 else 1.0 - r) - 0.5)))
    return sorted(rows, key=lambda c: -(getattr(c, name) or 0.0))
