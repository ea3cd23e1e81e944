"""The memory keyword channel's two indexes, fused into one list with an absolute score.

* trigram — FTS5 `trigram` over the stored text (the design's index: substrings of ≥ 3
  characters, identifiers, Japanese without word boundaries);
* words   — FTS5 over the word form of the text (cpersona/util/words.py: NFKC without
  format characters, stemmed English words, CJK/Hangul bigrams, words of any length), so
  `use` matches `uses` but not `user`, and `2`, `4`, 广西, 서울 are findable.

Each row gets two numbers on a 0..1 scale:

* `coverage` — the share of the query's information the row holds as whole words:
  Σ idf(t) over the query's word terms found in the row / Σ idf(t) over all of them
  (idf as in SQLite's bm25, retrieval/term_stats.py; computed over the whole table, every
  agent). A question whose rare words appear nowhere ("Do we use Kubernetes?" on a store
  without it) scores low on every row, however well the common words match: the absolute
  evidence the quality gate needs.
* `lexical` — the ranking score: the larger of the two indexes' bm25, each divided by the
  best bm25 of its index for this query (Bruch et al., TOIS 2023: per-query max
  normalisation), times ½ + ½·coverage. The larger, not the mean: the mean let word matches
  of an identifier's parts outrank the trigram match of the whole identifier (measured:
  benchmarks/rounds/2026-11-30-round-02-word-index.md). The coverage factor keeps a short
  row that holds only a common word of the query (a speaker's name, "did") from outscoring
  the row that holds its content words — bm25's length normalisation favours the short row.
  It credits the query's identifiers found verbatim (`WordQuery.credited`), without which
  the factor cost identifier queries (measured:
  benchmarks/rounds/2026-11-30-round-05-ranking.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

from cpersona.index import token_sets
from cpersona.retrieval import recency, term_stats, word_prior
from cpersona.retrieval.candidate import Candidate
from cpersona.storage import Session
from cpersona.util.text import match_expression
from cpersona.util.words import is_bigram, query_terms, spellings

WORDS = "memories_words"


@dataclass(frozen=True)
class WordQuery:
    """A query's word terms and their idf (empty when the query has none). `groups` are
    the alternatives of a query written with the OR operator (`广西 OR 桂林 OR 漓江`):
    such a query is answered by a row that holds any one of them."""

    terms: tuple[str, ...]
    idf: dict[str, float]
    groups: tuple[tuple[str, ...], ...] = ()
    #: the terms the MATCH uses: all of them, or without the very common ones on large tables
    match_terms: tuple[str, ...] = ()
    #: the query's identifiers (`E44671`, `rrf_k`, `aurora-eu-cli`), lower-cased
    identifiers: tuple[str, ...] = ()

    @property
    def attainable(self) -> float:
        return sum(self.idf.values())

    def coverage(self, content: str) -> float:
        """Σ idf of the terms `content` holds / Σ idf of all terms (0 without terms); the
        best alternative for an OR query."""
        present = token_sets.packed(content)
        return max((_share(pairs, total, present) for pairs, total in self._weights), default=0.0)

    def credited(self, content: str, coverage: float) -> float:
        """`coverage`, or the share of the query's identifiers `content` holds verbatim when
        that is larger: the word index splits an identifier into parts (and a query written
        without spaces around one, `aurora-eu-cliの設定`, into bigrams), so its words miss
        what the trigram index found whole."""
        if not self.identifiers:
            return coverage
        text = content.lower()
        return max(coverage, sum(i in text for i in self.identifiers) / len(self.identifiers))

    @cached_property
    def _weights(self) -> tuple[tuple[tuple[tuple[str, float], ...], float], ...]:
        """Each alternative's (`token_sets.needle` of a term, its idf) pairs and their Σ idf:
        the same for every row."""
        out = []
        for group in self.groups or (self.terms,):
            pairs = tuple((token_sets.needle(t), self.idf.get(t, 0.0)) for t in group)
            out.append((pairs, sum(w for _, w in pairs)))
        return tuple(out)


def _share(pairs: tuple[tuple[str, float], ...], total: float, present: str) -> float:
    return sum(w for needle, w in pairs if needle in present) / total if total > 0 else 0.0


#: Runs of ASCII letters, digits and identifier punctuation; one is an identifier when it has
#: ≥ 4 characters and a digit, an underscore, inner punctuation or camelCase (the exact-match
#: rule of the quality gate).
ASCII_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-./:#@]*[A-Za-z0-9]")
_IDENT = re.compile(r"\d|_|[A-Za-z0-9][-./:#@][A-Za-z0-9]|[a-z][A-Z]")
#: The share of `lexical` that rests on the row's word coverage (module doc).
COVERAGE_SHARE = 0.5
#: The explicit OR operator of a query (upper case, between spaces, as in FTS5 syntax).
_OR = re.compile(r"\s+OR\s+")


def word_query(session: Session, text: str) -> WordQuery:
    """The word terms of `text` with their idf. A CJK/Hangul bigram that no stored row holds
    weighs nothing in the coverage: in a question written without spaces most such bigrams
    straddle two of its own words (北海道とどこか → 道と, とど), so their absence says nothing
    about the store — while an English word no row holds ("Kubernetes") keeps its full
    weight, the clearest sign that the question is about something not stored. The words
    that ask for time ("latest", "first") weigh nothing either: they are about order, which
    the recency prior handles, not about content. On a small store each weight leans on the
    language-wide idf of the word (retrieval/word_prior.py, when the bundled model is
    installed), so an ordinary word no row holds ("happen") does not outweigh the rare word
    a row does hold ("deploy")."""
    terms = tuple(query_terms(text))
    alternatives = _OR.split(text.strip())
    groups = tuple(g for g in (tuple(query_terms(a)) for a in alternatives) if g) if len(alternatives) > 1 else ()
    if not terms:
        return WordQuery(terms, {}, groups)
    weights, counts = term_stats.idf(session, WORDS, list(terms))
    rows, forms = session.search.table_size(WORDS), spellings(text)
    for term in terms:
        weights[term] = word_prior.blend(weights[term], word_prior.language_idf(forms.get(term, [term])), rows)
        if (counts[term] == 0 and is_bigram(term)) or term in recency.TIME_WORDS:
            weights[term] = 0.0
    idents = tuple(dict.fromkeys(m.lower() for m in ASCII_RUN.findall(text) if len(m) >= 4 and _IDENT.search(m)))
    return WordQuery(terms, weights, groups, term_stats.drop_common(session, WORDS, list(terms), counts), idents)


def word_hits(session: Session, wq: WordQuery, run: Callable[[str], list]) -> list:
    """Rows of the word index matching any term (bm25 order; very common terms left out on
    large tables, as for the trigram index); [] without terms."""
    return run(match_expression(list(wq.match_terms or wq.terms))) if wq.terms else []


def holds_word(content: str, term: str) -> bool:
    """Whether `term` is one of the word-index tokens of `content` (index/token_sets.py)."""
    return token_sets.needle(term) in token_sets.packed(content)


def cover(rows: list[Candidate], wq: WordQuery) -> None:
    """Set `coverage` on the rows that have none yet (vector and episode hits), so the gate
    sees the same evidence for every row."""
    if wq.terms:
        for cand in rows:
            if cand.coverage is None and cand.kind != "profile":
                cand.coverage = wq.coverage(cand.content)


def _relative(rows: Iterable[Candidate], get: Callable[[Candidate], float | None]) -> dict[tuple[str, int], float]:
    raw = {c.key: -v for c in rows if (v := get(c)) is not None}
    best = max(raw.values(), default=0.0)
    return {k: (v / best if best > 0 else 1.0) for k, v in raw.items()}


def score(rows: list[Candidate], wq: WordQuery) -> list[Candidate]:
    """Set `coverage` and `lexical` on every row (module doc); best first, equal `lexical`
    broken by the sum of both indexes' scores (`version 2`: the trigram index scores every
    `version N` row alike, the word index prefers the row holding `2`)."""
    tri = _relative(rows, lambda c: c.bm25)
    word = _relative(rows, lambda c: c.word_bm25)
    both = {}
    for cand in rows:
        cand.coverage = wq.coverage(cand.content) if wq.terms else None
        t, w = tri.get(cand.key, 0.0), word.get(cand.key, 0.0)
        cand.lexical, both[cand.key] = max(t, w), t + w
        if cand.coverage is not None:
            cand.lexical *= coverage_factor(wq, cand.content, cand.coverage)
    return sorted(rows, key=lambda c: (-(c.lexical or 0.0), -both[c.key]))


def coverage_factor(wq: WordQuery, content: str, coverage: float) -> float:
    """1 − s + s·coverage' (s = COVERAGE_SHARE, coverage' = `WordQuery.credited`): the factor
    of a row's relative bm25 in its `lexical` (module doc)."""
    return 1.0 - COVERAGE_SHARE + COVERAGE_SHARE * wq.credited(content, coverage)


def score_episodes(rows: list[Candidate], wq: WordQuery) -> None:
    """Set `coverage` and `lexical` on the episode keyword hits the way `score` does for
    memories: bm25 relative to the best episode, times (1 − s + s·coverage). Without it the
    best episode counted as a perfect keyword match however little of the query it holds —
    a trigram of one word inside another (`key` in `allkeys-lru`) put an unrelated session
    summary above the memory that answers (found by a new user with four archived episodes)."""
    rel = _relative(rows, lambda c: c.bm25)
    for cand in rows:
        cand.lexical = rel.get(cand.key, 1.0)
        cand.coverage = wq.coverage(cand.content) if wq.terms else None
        if cand.coverage is not None:
            cand.lexical *= coverage_factor(wq, cand.content, cand.coverage)
