"""Writing systems of a text: which scripts its letters are written in, and how much of a
stored text a keyword search for a query can judge at all.

A keyword index matches a query's terms only in text written in the same script: an English
question cannot share a word with a row written in Japanese, whatever the row says. The
share of a row written in the query's scripts is how much of the row the keyword channel
can judge; the rest is invisible to it, not evidence against it (and a question partly in
another script than a row can look for only that part of itself in it): `seen_share`.

Scripts are told apart by Unicode block (The Unicode Standard, ch. 2 "Writing Systems"),
read from the lead byte of each character's UTF-8 form (RFC 3629: the lead byte fixes the
block range of a 2- or 3-byte character), so a text is classified by one `bytes.translate`
and a few counts in C, never character by character in Python:

* latin — ASCII letters, U+00C0–U+024F (accented Latin);
* cjk — U+3000–U+9FFF (kana, CJK punctuation, ideographs) and U+F000–U+FFFF (full-width
  forms, half-width kana): Japanese mixes them in every sentence;
* hangul — U+A000–U+D7FF;
* greek — U+0370–U+03FF; cyrillic — U+0400–U+04FF; other — the remaining 2-byte blocks
  and U+0800–U+1FFF (Hebrew, Arabic, Indic, Thai, …, one script "other").

Digits, ASCII punctuation, U+0080–U+00BF and U+2000–U+2FFF (general punctuation, symbols)
belong to no script: they are written the same everywhere. Four-byte characters (emoji,
rare ideographs) count for none either.
"""

from __future__ import annotations

import string
from functools import lru_cache

#: UTF-8 lead byte (or ASCII letter) → the script it starts; everything else → none.
_CLASSES = {
    "latin": [*(ord(c) for c in string.ascii_letters), *range(0xC3, 0xCA)],
    "greek": [0xCD, 0xCE, 0xCF],
    "cyrillic": [0xD0, 0xD1, 0xD2, 0xD3],
    "other": [*range(0xD4, 0xE2)],
    "cjk": [*range(0xE3, 0xEA), 0xEF],
    "hangul": [0xEA, 0xEB, 0xEC, 0xED],
}
_CODES = {name: bytes([ord("a") + i]) for i, name in enumerate(_CLASSES)}
_TABLE = bytearray(b"." * 256)
for _name, _leads in _CLASSES.items():
    for _lead in _leads:
        _TABLE[_lead] = _CODES[_name][0]
_TRANSLATE = bytes(_TABLE)


@lru_cache(maxsize=8192)
def letters(text: str) -> tuple[tuple[str, int], ...]:
    """(script, number of characters) for each script `text` uses (module doc); cached, since
    the same rows come back recall after recall."""
    marks = text.encode("utf-8", "surrogatepass").translate(_TRANSLATE)
    return tuple((name, n) for name, code in _CODES.items() if (n := marks.count(code)) > 0)


def _share(counts: tuple[tuple[str, int], ...], scripts: frozenset[str]) -> float:
    total = sum(n for _, n in counts)
    return 1.0 if total == 0 or not scripts else sum(n for name, n in counts if name in scripts) / total


def seen_share(query: str, content: str) -> float:
    """How much of `content` a keyword search for `query` can judge, in [0, 1]: the share of
    the query's letters written in a script the content uses times the share of the
    content's letters written in a script the query uses. 1 when both are written in the
    same scripts (or either has no letters); 0 when they share none — an English question
    and a row in Japanese. A Japanese question naming `checkout-api` can look for half of
    itself in an English row (½); an English question can look at the Latin name in
    `コンビニ決済はKOMOJU経由で対応する。` only."""
    if query.isascii() and content.isascii():
        return 1.0  # Latin letters or none on both sides (the common case, without counting)
    q, c = letters(query), letters(content)
    return _share(q, frozenset(name for name, _ in c)) * _share(c, frozenset(name for name, _ in q))
