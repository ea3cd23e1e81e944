"""The query's anchors: the identifiers and names a question is about.

A question that names something — `CVE-2024-3095`, `ERR_DISK_9755`, `Caroline`, `Kubernetes`
— is about that thing. A stored row that mentions none of them can share every other word
and be close in meaning (the row about `CVE-2024-3094` shares all of a question about
`CVE-2024-3095` but its number) without answering it; the quality gate
(retrieval/gate.py `Gate.answers`) reads the anchors to tell the two apart:

* **identifiers** — exact by nature: a recall whose rows hold none of the query's
  identifiers has nothing about them, whatever else the rows share. An identifier here is a
  token of the exact-match rule (`gate.is_identifier`) with letters and digits, an underscore
  or two joiners (`CVE-2024-3094`, `ERR_DISK_9755`, `src/app.py`, `v3.11`); not a quantity
  (a number with a unit or ordinal, `10th`, `5pm`, `1990s`, `5-day`, names an amount, not a
  thing), not a word pair joined once (`and/or`, `U.S.`, `artists/bands`), not digits alone
  (`2024-01-07`, `14:00`, `3.11`: dates, times and numbers are written in too many ways to
  be looked for letter by letter). A row holds one when it holds the identifier's runs of
  letters and digits in order, case folded, with only other characters between them
  (`SIAC\\_GEE` in Markdown, `siac-gee` and `SIAC GEE` all hold `SIAC_GEE`;
  `CVE-2024-3094` does not hold `CVE-2024-3095`).
* **names** — capitalised words inside a sentence (`Caroline`, `Nightingale`), not its first
  word, not a month or weekday, not an English function word; and words with a capital
  inside (`PostgreSQL`, `iPhone`, `getUserName`) anywhere. Spelling varies more for names
  (`Mel` / `Melanie`, `Postgres` / `PostgreSQL`) and an embedding model knows such aliases, so a
  row holding none of the query's names is not ruled out: its words just count for nothing,
  and its cosine alone must carry the answer (`gate.UNNAMED`). A row holds a name when one of
  its word-index tokens (retrieval/lexical.py `holds_word`: case folded, English stems) is the
  name's.

Capitalisation marks names in English and the other Latin-script languages that keep
proper nouns capitalised; German capitalises every noun, so there every noun of a question is
one of its names (a row must hold one of them or be close in meaning). Scripts without case
(Japanese, Chinese) have no names here; their identifiers still count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from cpersona.retrieval.lexical import ASCII_RUN, holds_word
from cpersona.util.text import STOPWORDS
from cpersona.util.words import match_form, query_terms

#: What makes a run an identifier of this rule: letters with digits, an underscore,
#: or two joiners (`src/app.py`, `a.b.c`); one joiner between letters is a word pair.
_LETTER_DIGIT = re.compile(r"[A-Za-z].*\d|\d.*[A-Za-z]")
_MARKED = re.compile(r"_|[./:#@-].*[./:#@-]")
#: A number with a unit or an ordinal: `10th`, `3rd`, `5pm`, `100mg`, `1990s`, `2.5k`, `5-day`, `10-minute`.
_QUANTITY = re.compile(r"\d+(?:[.,]\d+)?(?:[A-Za-z]{1,4}|-[A-Za-z]+)")
_HAS_LETTER = re.compile(r"[A-Za-z]")
_INNER_MARK = re.compile(r"[0-9_]|\w[./:#@-]\w")
_ALNUM = re.compile(r"[0-9a-z]+")
_JOIN = "[^0-9a-z]*"
_EDGE_BEFORE, _EDGE_AFTER = "(?<![0-9a-z])", "(?![0-9a-z])"
_NAME = re.compile(r"[A-Z][a-z]+")
_UPPER_INSIDE = re.compile(r"(?<=.)[A-Z]", re.S)
_CAMEL = re.compile(r"[A-Za-z]*[a-z][A-Z][A-Za-z]*")
_SENTENCE_END = re.compile(r"(?<=[.?!。？！])\s+")
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$")
_EDGE = "\"'`()[]{}<>,.;:!?“”‘’«»"
#: Capitalised because of the calendar, not because they name what is asked about.
_CALENDAR = frozenset((
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
))


def spelling(identifier: str) -> re.Pattern[str]:
    """The pattern of `identifier` in lower-cased text (`match_form`): its runs of letters and
    digits, in order, with anything but letters and digits between them (module doc), and no
    letter or digit right before or after it — `CVE-2024-309` is not held by a row that says
    `CVE-2024-3094`, nor `VE-2024-3094`."""
    parts = _ALNUM.findall(match_form(identifier).lower())
    return re.compile(_EDGE_BEFORE + _JOIN.join(re.escape(p) for p in parts) + _EDGE_AFTER)


def identifiers(query: str) -> tuple[str, ...]:
    """The query's identifiers as written (module doc), in order, without repeats."""
    if not _INNER_MARK.search(query):
        return ()  # no digit, underscore or joiner between two characters: no identifier
    found = [m for m in ASCII_RUN.findall(query) if len(m) >= 4 and not _QUANTITY.fullmatch(m)
             and _HAS_LETTER.search(m) and (_LETTER_DIGIT.search(m) or _MARKED.search(m))]
    return tuple(dict.fromkeys(found))


def names(query: str) -> dict[str, str]:
    """{word-index term: the name as written} of the query's names (module doc)."""
    found: dict[str, str] = {}
    if query[1:].islower() or not _UPPER_INSIDE.search(query):
        return found  # no capital after the first character: no name
    for sentence in _SENTENCE_END.split(query.strip()):
        for i, token in enumerate(sentence.split()):
            if token.islower():
                continue
            word = _POSSESSIVE.sub("", token.strip(_EDGE)).strip(_EDGE)
            if not _CAMEL.fullmatch(word) and (i == 0 or not _NAME.fullmatch(word) or word.lower() in _CALENDAR
                                                or word.lower() in STOPWORDS):
                continue
            terms = [t for t in query_terms(word) if len(t) > 1]
            if terms:
                found.setdefault(terms[0], word)
    return found


@dataclass(frozen=True)
class Anchors:
    """The identifiers (as written; `patterns`: as `spelling` patterns) and names ({term: as
    written}) of one query."""

    idents: tuple[str, ...] = ()
    names: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, query: str) -> Anchors:
        return cls(identifiers(query), tuple(names(query).items()))

    @cached_property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        """`spelling` of each identifier, compiled when first needed (a recall with an exact
        match never asks: compiling a query's patterns cost ~0.1 ms per identifier)."""
        return tuple(spelling(i) for i in self.idents)

    def idents_held(self, content: str) -> set[str]:
        """The identifiers (as written) that `content` holds."""
        if not self.idents:
            return set()
        text = match_form(content).lower()  # full-width forms and invisible characters as the index reads them
        return {i for i, p in zip(self.idents, self.patterns, strict=True) if p.search(text)}

    def holds_name(self, content: str) -> bool:
        """Whether `content` holds one of the names as a word (True when the query has none)."""
        if not self.names:
            return True
        return any(holds_word(content, term) for term, _ in self.names)

    def missing(self, contents: list[str]) -> list[str]:
        """The anchors (as written) that none of `contents` holds: identifiers one by one, the
        names together (a row holding any one of them holds the query's names)."""
        held = set().union(*(self.idents_held(c) for c in contents)) if contents else set()
        out = [i for i in self.idents if i not in held]
        if self.names and not any(self.holds_name(c) for c in contents):
            out += [written for _, written in self.names]
        return out
