"""Quality gate: is a candidate good enough to return at all?

The gate keys on the precedence chain confidence > rsf > cc > cosine > rrf — the same chain that names
`match_reason.signal` — against the pool-size heuristic
    min_score(pool) = 0.5 − 0.3 · min(1, ln(pool + 1) / ln 500)      (pool ≤ 0 → 0.5)
(0.5 on an empty store, 0.2 from ≈500 rows); rrf rows compare against min_score · 3/(k+1),
the same fraction of the largest possible rrf. A cc row passes when either of its
evidences clears min_score on its own scale: its cosine, or its lexical score (bm25
relative to the query's best keyword hit). Unscored rows (cascade keyword/episodes)
pass only for a blank query or a pool ≥ 100.

Our rule on top of the spec: an EXACT match is never gated. A row whose content contains
the whole query, a quoted phrase of it, or one of its identifiers (tokens with digits,
underscores, inner punctuation or camelCase: `CVE-2024-3094`, `ERR_TIMEOUT_1750`,
`src/app.py`, `getUserName`) is kept whatever its score — the earlier system returned
nothing for an exact error string on a 30-memory store with embeddings off. The rule holds
under calibration and confidence scoring too, and autocut never cuts an exact match.

What a query names (retrieval/anchors.py) is held against the rows it would return: when
none of them holds any of its identifiers (`CVE-2024-3095` on a store that only mentions
`CVE-2024-3094`) the recall answers with exact matches only; a row holding none of its names
(`Caroline`) answers on its cosine alone (`UNNAMED`).

Calibrated gate (cpersona/calibration/): when the agent has a fused gate measured on
the active signal, rows keyed on that signal compare against it instead of the heuristic;
a cc row then passes when its cc clears the gate OR its cosine clears the agent's
calibrated vector threshold, and a row keyed on cosine (rrf mode's vector hits) compares
against that vector threshold instead of the pool heuristic. With confidence scoring on,
every row carries a confidence and the gate keys on it. Profile rows pass iff the pool
holds ≥ 50 rows. `deep` halves every threshold.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from cpersona.retrieval.anchors import Anchors
from cpersona.retrieval.candidate import PROFILE, Candidate
from cpersona.util.words import match_form

#: Pool size at which the heuristic reaches its floor (the original's pool-size heuristic).
POOL_SATURATION = 500
UNSCORED_MIN_POOL = 100
PROFILE_MIN_POOL = 50
#: Gate precedence: the first score a row has names its signal (= match_reason.signal).
PRECEDENCE = ("confidence", "rsf", "cc", "cosine", "rrf")
_QUOTED = re.compile(r"\"([^\"]{3,})\"|「([^」]{2,})」|'([^']{3,})'")
_EDGE_PUNCT = "\"'`()[]{}<>,;:!?。、，！？「」"
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")
MIN_NEEDLE, MIN_CJK_NEEDLE = 3, 2
#: What makes a token an identifier: an underscore, camelCase, inner punctuation of a path,
#: version, address, date or time (`src/app.py`, `3.11`, `user@host`, `2024-01-07`, `14:00`), or letters and
#: digits together (`CVE-2024-3094`, `zebra-token-7`). A bare number (`2023`) and words
#: joined by a hyphen (`self-portrait`) are ordinary words: as needles they made every row
#: holding the year an exact match (measured: benchmarks/rounds/2026-11-30-round-05-gate.md).
_IDENT = re.compile(r"_|[a-z][A-Z]|[A-Za-z0-9][./:#@][A-Za-z0-9]|\d-\d")
_LETTER, _DIGIT = re.compile(r"[^\W\d_]"), re.compile(r"\d")


def is_identifier(token: str) -> bool:
    """Whether a query token (edge punctuation stripped) names something exactly (see `_IDENT`)."""
    return len(token) >= 4 and (bool(_IDENT.search(token)) or bool(_LETTER.search(token) and _DIGIT.search(token)))


@dataclass(frozen=True)
class AgentGate:
    """The per-agent thresholds one recall uses (calibration provides them; None = the
    heuristic) and the notice to show when they are not calibrated."""

    vector_threshold: float
    fused_gate: float | None = None
    signal: str | None = None
    cosine_min: float | None = None
    #: (threshold − mean) / std of the agent's unrelated pairs at calibration (None: not recorded)
    cosine_z: float | None = None
    #: precision β of the agent (set_recall_precision; 1.0 = balanced): scales the answer bar.
    beta: float = 1.0
    notice: dict[str, Any] | None = None


#: A row whose cosine alone makes a recall answer must reach this multiple of the answer
#: bar's cosine (0.36 at the default threshold 0.3 and β 1); below it the row needs some of
#: the query's words too (`JOINT`). A row closer to the query than the chance maximum of its
#: scan window (`chance_maximum`) may count its words toward this bar instead.
VECTOR_ALONE = 1.2
#: Joint evidence of one row: cosine / cosine bar + coverage / coverage bar must reach this
#: (e.g. cosine 0.3 with half of the bar's word share). Measured in-process on the public sets:
#: benchmarks/rounds/2026-11-30-round-05-gate.md.
JOINT = 1.5
#: Without a query vector a recall answers on words alone, with this fraction of the word
#: share asked for (β 1: a row holding 20 % of the query's word information). At ½ (a quarter)
#: SCALE's paraphrased preference questions, whose answer row holds only the person's name,
#: came back empty, and so did answerable LoCoMo questions; at 0.4 they answer, while most of
#: LongMemEval's questions asked of LoCoMo's agents stay unanswered and the hand-written
#: unanswerable questions of the tiny store all stay empty (measured:
#: benchmarks/rounds/2026-11-30-round-05-gate.md).
NO_VECTOR_SHARE = 0.4
#: A row that holds none of the query's names (retrieval/anchors.py) answers on its cosine
#: alone, at the joint bar: its words count for nothing. On LoCoMo's questions asked of the
#: pooled LongMemEval agent (9.8k rows, where every word of "What did Caroline research?"
#: but the name is in some long row) this left most of them unanswered, as they should be;
#: 1.5–2.0 × the cosine bar measured alike (benchmarks/rounds/2026-11-30-round-06-abstention.md).
UNNAMED = JOINT


def chance_maximum(n: int, mean: float, std: float) -> float | None:
    """The cosine the closest of n unrelated rows reaches by chance: μ + σ·√(2 ln n), the
    expected maximum of n Gaussian draws (Cramér 1946), from the query's cosines over its scan
    window (count n, mean μ, spread σ); None below 2 rows or without spread."""
    return mean + std * math.sqrt(2.0 * math.log(n)) if n >= 2 and std > 0 else None


def answer_bar(vector_threshold: float, beta: float, vectors: bool = True,
               background: tuple[int, float] | None = None) -> tuple[float, float]:
    """(cosine, coverage): the units in which `Gate.answers` weighs a row's evidence. At
    β = 1 (balanced): `vector_threshold` — the configured CPERSONA_VECTOR_MIN_SIMILARITY,
    not an agent's calibrated threshold: calibration separates pairs of STORED rows (the
    same session vs random pairs), whose cosines run higher than a question's to its answer
    (as this unit an agent's calibrated threshold left far more answerable questions empty:
    benchmarks/rounds/2026-12-01-round-07-calibration.md) — and
    half of the query's word information; the weight β/(1+β) of precision in an F-β trade-off scales both (strict
    β 2 → 2/3 of the words, 1.33 × the threshold; lenient β 0.5 → 1/3, 0.67 ×). Without a
    query vector (embeddings off or unreachable) the words must answer alone, at
    `NO_VECTOR_SHARE` of that share (a fifth of the words at β 1). β (set_recall_precision)
    moves this bar; the calibrated threshold moves which rows pass (`Gate.passes`).

    `background` = (n, σ) of the query's cosines over its scan window: beyond
    `POOL_SATURATION` rows the cosine unit rises by σ·(√(2 ln n) − √(2 ln 500)), the growth
    of the expected maximum of n unrelated cosines (the Gaussian extreme-value rate,
    σ·√(2 ln n)): among 10,000 rows some unrelated row nearly always reaches a bar set for
    a few hundred."""
    share = beta / (1.0 + beta)
    cosine = vector_threshold * 2.0 * share
    if background is not None and background[0] > POOL_SATURATION:
        n, sigma = background
        cosine += sigma * (math.sqrt(2 * math.log(n)) - math.sqrt(2 * math.log(POOL_SATURATION)))
    return cosine, share if vectors else share * NO_VECTOR_SHARE


#: Fewest cosines in a question's scan window that can place the calibrated cut (`query_cosine_cut`):
#: among n rows none lies more than (n − 1)/√n spreads above their mean, so in a scope of 2–4 rows a
#: cut z ≈ 1.3 spreads up lay above every row and emptied answers the heuristic keeps (found by a
#: break-it pass). 30 is where the sample mean and spread settle.
CUT_MIN_WINDOW = 30


def query_cosine_cut(threshold: float | None, z: float | None, background: Any) -> float | None:
    """The calibrated per-row cosine cut of one recall (`Gate.cosine_min`; None = uncalibrated).

    Calibration places the agent's threshold between pairs of STORED rows of one session and
    random pairs: z = (threshold − μ) / σ of the random pairs. A question's cosines to rows run
    lower than rows' to each other (short text, another register), so the raw threshold cut
    answers away (LoCoMo's agents calibrate above the configured threshold; measured:
    benchmarks/rounds/2026-12-01-round-07-calibration.md). The cut is placed as far into THIS
    query's cosines over its scan window instead: μ_q + z·σ_q (`background`: WindowStats with mean, std). Without a
    recorded z or a spread of the query's cosines: the raw threshold; below `CUT_MIN_WINDOW`
    cosines: None (the heuristic's cut). The caller never lets
    the cut fall below the pool heuristic's (`min_score`): a question whose cosines all sit
    near zero — an identifier such as `BILL-5003` — put it at ~0.05 and let chance-level rows
    through (a new user's store: 3 rows → 10 once calibrated)."""
    if threshold is None or z is None or background is None or background.std <= 0:
        return threshold
    if background.n < CUT_MIN_WINDOW:
        return None  # too few cosines to place it: the heuristic's cut (pool-size min_score)
    return background.mean + z * background.std


def evidence_cosine(cand: Candidate) -> float | None:
    """The row's cosine as measured, before the episode boundary penalty
    (retrieval/scoring.py) scaled it: the penalty ranks older rows below newer ones, it is no
    evidence that a row does not answer. Judged after it, every memory written before the
    last archived episode had its cosine halved while its word coverage stayed whole, so a
    question answered only by the meaning of an older row — one asked in another language
    than the row, whose words it cannot share — came back empty (a new user's bilingual
    store: 11 of 32 such questions). None without a cosine."""
    if cand.cosine is None:
        return None
    return cand.cosine / cand.penalty if cand.penalty > 0 else cand.cosine


def min_score(pool: int, deep: bool = False) -> float:
    """Pool-size heuristic threshold on a similarity scale; halved for `deep`."""
    base = 0.5 if pool <= 0 else round(0.5 - 0.3 * min(1.0, math.log(pool + 1) / math.log(POOL_SATURATION)), 4)
    return base * 0.5 if deep else base


def signal(cand: Candidate) -> tuple[str, float] | None:
    """(signal name, score) by precedence confidence > rsf > cc > cosine > rrf; None when unscored."""
    for name in PRECEDENCE:
        value = getattr(cand, name)
        if value is not None:
            return name, value
    return None


@lru_cache(maxsize=8192)
def _folded(content: str) -> str:
    """A row's text as the exact-match rule reads it (NFKC without format characters, lower
    case); cached: the gate asks about the same rows many times per recall."""
    return match_form(content).lower()


def _holds(text: str, needle: str, bounded: bool) -> bool:
    """`needle` occurs in `text`; when `bounded` (an identifier) only as a whole — no letter
    or digit right before or after it (`cve-2024-309` is not in `cve-2024-3094`)."""
    if not bounded:
        return needle in text
    start = text.find(needle)
    while start >= 0:
        end = start + len(needle)
        if not (start and text[start - 1].isascii() and text[start - 1].isalnum()) and \
                not (end < len(text) and text[end].isascii() and text[end].isalnum()):
            return True
        start = text.find(needle, start + 1)
    return False


def exact_needles(query: str) -> list[str]:
    """Lower-cased strings whose presence in a row makes it an exact match: the whole
    query (≥ 3 chars, or ≥ 2 when it holds CJK — 梅雨 is a word), quoted phrases,
    identifier tokens."""
    whole = query.strip()
    shortest = MIN_CJK_NEEDLE if _CJK.search(whole) else MIN_NEEDLE
    needles = [whole] if len(whole) >= shortest else []
    needles += [next(g for g in m.groups() if g) for m in _QUOTED.finditer(query)]
    for token in query.split():
        token = token.strip(_EDGE_PUNCT)
        if is_identifier(token):
            needles.append(token)
    return [match_form(n).lower() for n in dict.fromkeys(needles)]


@dataclass(frozen=True)
class Gate:
    """Thresholds for one recall.

    `min_score` is the pool heuristic (already halved for deep). `fused_gate` is the agent's
    calibrated gate for `gate_signal` (None = heuristic); `cosine_min` the calibrated vector
    threshold used as cc's cosine evidence (None = min_score). `enabled=False`
    (CPERSONA_GATE_ENABLED=false) keeps every scored row — profiles still need the pool.
    """

    pool: int
    min_score: float
    rrf_k: int
    blank_query: bool
    needles: tuple[str, ...]
    fused_gate: float | None = None
    gate_signal: str | None = None
    cosine_min: float | None = None
    enabled: bool = True
    #: the whole query, lower-cased and stripped ('' = none)
    whole: str = ""
    #: `answer_bar`: (cosine, coverage); None = every recall answers (no abstention).
    answer: tuple[float, float] | None = None
    #: `chance_maximum` of the query's scan window (None = no vector background)
    chance_max: float | None = None
    #: the identifiers and names the query is about (retrieval/anchors.py)
    anchors: Anchors = field(default_factory=Anchors)
    #: rows the question names by what they are, kept like exact matches (retrieval/sessions.py)
    pinned: frozenset[tuple[str, int]] = frozenset()

    def exact(self, cand: Candidate) -> bool:
        """The row contains a needle, or IS the query (a stored text is findable by itself,
        however short), or the question names it (`pinned`)."""
        if cand.key in self.pinned:
            return True
        found = self._exact_rows.get(cand.content)
        if found is None:
            text = _folded(cand.content)
            found = self._exact_rows[cand.content] = any(_holds(text, n, bounded) for n, bounded in self._needles) \
                or (bool(self.whole) and text.strip() == self.whole)
        return found

    @cached_property
    def _exact_rows(self) -> dict[str, bool]:
        """Row text → whether it is an exact match (`exact`): the gate of one recall asks about
        the same rows several times (lender bar, per-row gate, answer bar, autocut)."""
        return {}

    @cached_property
    def _needles(self) -> tuple[tuple[str, bool], ...]:
        """The needles, each with whether it is an identifier (matched whole)."""
        return tuple((n, is_identifier(n)) for n in self.needles)

    def passes(self, cand: Candidate) -> bool:
        if cand.kind == PROFILE:
            return self.pool >= PROFILE_MIN_POOL
        if not self.enabled or self.exact(cand):
            return True
        sig = signal(cand)
        if sig is None:
            return self.blank_query or self.pool >= UNSCORED_MIN_POOL
        name, value = sig
        calibrated = self.fused_gate if self.gate_signal == name else None
        if name == "cc":
            cos_min = self.cosine_min if self.cosine_min is not None else self.min_score
            cosine = evidence_cosine(cand)
            if cosine is not None and cosine >= cos_min:
                return True
            if calibrated is not None:
                return value >= calibrated
            return cand.coverage is not None and cand.coverage >= self.min_score
        if calibrated is not None:
            return value >= calibrated
        if name == "cosine" and self.cosine_min is not None:  # the agent's calibrated vector threshold
            return value >= self.cosine_min
        threshold = self.min_score * 3.0 / (self.rrf_k + 1) if name == "rrf" else self.min_score
        return value >= threshold

    def answers(self, rows: list[Candidate]) -> bool:
        """Whether the recall has anything to say: some row is an exact match, or — when
        some row holds one of the query's identifiers, if it has any (retrieval/anchors.py) —
        some row holds the answer bar's share of the query's word information, has a cosine
        of `VECTOR_ALONE` × its cosine (cosine and words together, for a row above the chance
        maximum), or has both halves of the evidence adding up to `JOINT`; a row holding
        none of the query's names counts its cosine alone, at `UNNAMED`. When no row holds
        any of the query's identifiers, no row answers but an exact match. A question whose
        rare words appear in no row and whose nearest row is not close ("Do we use
        Kubernetes?" on a store without it) gets no row; so does one about `CVE-2024-3095`
        on a store that only mentions `CVE-2024-3094`. Cosines are judged before the episode
        boundary penalty."""
        if self.answer is None or not self.enabled or self.blank_query:
            return True
        if all(c.cosine is None and c.coverage is None for c in rows):
            return True  # no evidence to judge by (FTS off and no vectors): the pool heuristic decides
        rows = [c for c in rows if c.kind != PROFILE]
        if any(self.exact(c) for c in rows):
            return True
        if self.anchors.idents and not any(self.anchors.idents_held(c.content) for c in rows):
            return False
        return any(self.evident(c) for c in rows)

    def missing(self, rows: list[Candidate]) -> list[str]:
        """The query's identifiers and names (as written) that none of `rows` holds."""
        return self.anchors.missing([c.content for c in rows if c.kind != PROFILE])

    def evident(self, cand: Candidate, names: bool = True) -> bool:
        """Whether `cand`'s own evidence clears the answer bar (`answers`); True without a
        bar. With `names`, a row holding none of the query's names counts its cosine alone."""
        if self.answer is None:
            return True
        named = not names or self.anchors.holds_name(cand.content)
        cos_unit, cov_unit = self.answer
        raw = evidence_cosine(cand)  # the chance maximum bounds unpenalised cosines too
        cosine = raw if raw is not None else 0.0
        # a threshold ≤ 0 (CPERSONA_VECTOR_MIN_SIMILARITY may be negative): any cosine reaching it answers
        vector = cosine / cos_unit if cos_unit > 0 else (math.inf if cosine >= cos_unit else 0.0)
        if not named:
            return vector >= UNNAMED
        words = (cand.coverage or 0.0) / cov_unit
        outlier = self.chance_max is not None and raw is not None and raw >= self.chance_max
        return words >= 1.0 or vector + words >= JOINT or vector + (words if outlier else 0.0) >= VECTOR_ALONE

    def apply(self, rows: list[Candidate], limit: int | None = None) -> list[Candidate]:
        """The rows that pass, best first. Whether the recall answers at all is judged on the
        rows it would return (the first `limit`; all when None): a deeper candidate that
        clears the bar cannot be what answers it. Asked another set's questions, far more
        recalls then answer nothing, at no measurable cost to the answerable ones (measured:
        benchmarks/rounds/2026-11-30-round-03-vector-weight.md)."""
        if not self.answers(rows[:limit] if limit is not None else rows):
            return [c for c in rows if c.kind == PROFILE and self.passes(c)]
        return [c for c in rows if self.passes(c)]


def autocut(rows: list[Candidate], min_results: int, min_gap_ratio: float,
            keep: Callable[[Candidate], bool] | None = None) -> list[Candidate]:
    """Cut at the largest score gap on similarity-scale lists only:
    keyed on confidence when the first row has one; never on rank-fusion lists (rrf, rsf,
    cc — their gaps are not relevance breaks); otherwise on cosine when every row has one.
    Rows for which `keep` is true (exact matches) survive a cut, in their order.
    """
    if len(rows) < max(2, min_results):
        return rows
    if rows[0].confidence is not None:
        scores = [c.confidence if c.confidence is not None else 0.0 for c in rows]
    elif any(getattr(rows[0], n) is not None for n in ("rrf", "rsf", "cc")) or any(c.cosine is None for c in rows):
        return rows
    else:
        scores = [c.cosine for c in rows if c.cosine is not None]  # every row has one (checked above)
    if scores[0] <= 0:
        return rows
    gaps = [a - b for a, b in itertools.pairwise(scores)]
    best = max(range(len(gaps)), key=lambda i: gaps[i])
    if gaps[best] / scores[0] < min_gap_ratio:
        return rows
    head, tail = rows[: best + 1], rows[best + 1:]
    return head + [c for c in tail if keep is not None and keep(c)]
