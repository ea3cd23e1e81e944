"""Questions that name alternatives: "Which gift did I buy first, the necklace for my sister or
the photo album for my mom?" asks about two events, and its answer needs a row for each.

One ranked list serves such a question badly: bm25 and the cosine reward a row for holding
much of the whole question, so the rows about the alternative with the rarer words (or
the assistant answers that repeat both) fill the first ten, and the turn about the other
alternative — which shares few of the question's words — ranks below them or outside the
pool. Here the question is asked once per alternative as well (`split`: the clause that
reads `A or B [or C]`, each alternative in the clause's place, the rest of the question
kept), and the lists are merged (`merge`): a row's place is its best normalised score over
the lists, score / the best score of its list — max-normalised fusion, no constant.

Only an alternative in a clause of its own counts (after a comma, semicolon, colon or
dash: `…first, A or B?`, `…first - A or B?`): there each alternative is a phrase that
can stand in the clause's place. "Did I pick up or return …" (verbs sharing an object)
would split into phrases that no longer say what was picked up.

The merged rows keep the evidence of the whole question: a row that only an alternative's
list returned gets its coverage of the whole question's words, so the quality gate judges
every row as before (the gate never sees an alternative's larger share).

Kept because it lifts the temporal "which came first (last), A or B" questions it splits and
moves no other question, unanswerable ones included. Tried and not kept: merging by reciprocal
rank (a row of one alternative's list pushed down by the other's), round robin (no better, and
it depends on the lists' order), diversifying the one list on which alternative a row holds
(xQuAD: the missing turn is seldom in the pool), and splitting every `or` (verbs too).
Each alternative is asked with the whole question's vector (retrieval never embeds): the
gain comes from the keyword lists, and the alternative's own vector did no better. Cost: two
more passes of the retrievers, for such a question only.
Measured: benchmarks/rounds/2026-12-01-round-07-alternatives.md.
"""

from __future__ import annotations

import re

from cpersona.retrieval import lexical
from cpersona.retrieval.candidate import Candidate

#: A clause boundary: a comma, semicolon or colon, or a dash between spaces (kept by `split`).
_CLAUSE = re.compile(r"(\s*[,;:]\s*|\s+[-\u2013\u2014]\s+)")
#: The word `or` between two alternatives (lower case: `OR` is the keyword operator).
_OR = re.compile(r"\s+or\s+")


#: A clause naming more alternatives than this is not split: each costs a pass of the retrievers
#: (a 14,000-character question naming 2,000 took 7.6 s instead of 0.3 s — a break-it pass), and a
#: question a person asks names two or three.
MAX_ALTERNATIVES = 4


def split(query: str) -> list[str]:
    """The question once per alternative of its first clause (not its first) that reads
    `A or B [or C]`; [] when it names no alternatives so, or more than `MAX_ALTERNATIVES`."""
    pieces = _CLAUSE.split(query)
    for i in range(2, len(pieces), 2):
        parts = [p for p in _OR.split(pieces[i]) if p.strip(" ?!.")]
        if len(parts) > MAX_ALTERNATIVES:
            return []
        if len(parts) >= 2:
            head, tail = "".join(pieces[:i]), "".join(pieces[i + 1:])
            return [head + part + tail for part in parts]
    return []


def merge(lists: list[list[Candidate]], words: lexical.WordQuery | None) -> list[Candidate]:
    """One list, best first: each row at its best score / its list's best score (the first
    list's object kept for a row in several: the whole question's evidence). Rows without a
    score keep their order after the scored ones. A row only an alternative found gets its
    coverage of the whole question (`words`)."""
    best: dict[tuple[str, int], float] = {}
    rows: dict[tuple[str, int], Candidate] = {}
    unscored: list[Candidate] = []
    for n, found in enumerate(lists):
        top = max((c.cc for c in found if c.cc is not None), default=0.0)
        for cand in found:
            if cand.cc is None:
                if cand.key not in rows:
                    rows[cand.key] = cand
                    unscored.append(cand)
                continue
            score = cand.cc / top if top > 0 else 0.0
            if cand.key not in rows:
                rows[cand.key] = cand
                if n and words is not None and words.terms:
                    cand.coverage = words.coverage(cand.content)
            best[cand.key] = max(best.get(cand.key, score), score)
    scored = sorted((rows[k] for k in best), key=lambda c: -best[c.key])
    return scored + [c for c in unscored if c.key not in best]
