"""The word-level text form: what the word index (`memories_words`) stores and what a
query is matched against in it.

* `match_form` — the text a user means, independent of how it was encoded: Unicode
  compatibility normalisation (NFKC, UAX #15) with format characters (category Cf:
  zero-width space U+200B, joiners, soft hyphen, BOM, bidi marks) removed. NFKC rather than
  NFC because matching should also fold what looks the same to a reader but is encoded
  differently: full-width Latin and digits (`ＮＡＳ２`, common in Japanese text),
  half-width katakana, ligatures (`ﬁ`), circled and super-script digits. Stored text is
  never rewritten; only the index and the comparison use this form.
* `canonical_forms` — for dedup, canonical equivalence only (NFC / NFD): two texts a reader
  cannot tell apart (macOS writes NFD, the web NFC) are one memory, but `x²` and `x2` stay two.
* `word_tokens` — the tokens of a text for the word index: match form, case folded,
  split into runs of letters and digits; English words reduced to their Snowball stem
  (Porter2, https://snowballstem.org — `uses`/`used` → `use`, but not `user`); runs of
  CJK ideographs, kana and Hangul (written without spaces, or with particles glued to the
  word) as overlapping character bigrams plus single characters, the standard units of
  CJK keyword retrieval (Kwok, "Comparing representations in Chinese information
  retrieval", SIGIR 1997), so a two-character word such as 广西, 设备 or 서울, or one
  character such as 雨, is findable.
* `query_terms` — the distinct tokens of a query minus English function words.

The tokens are space-separated letters and digits only, so SQLite's `unicode61` tokenizer
(with diacritics kept) splits the stored form exactly where this module did.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import Stemmer

from cpersona.util.text import STOPWORDS

#: Ideographs, kana, half-width katakana and Hangul syllables / jamo: scripts indexed as bigrams.
_BIGRAM_SCRIPTS = ("\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
                   "\uf900-\ufaff\uff66-\uff9f")
_BIGRAM_RUN = re.compile(f"[{_BIGRAM_SCRIPTS}]+")
_HAS_BIGRAM_SCRIPT = re.compile(f"[{_BIGRAM_SCRIPTS}]")
#: Letters and digits (Python's `\w` without the underscore): what unicode61 keeps as tokens.
_TOKEN = re.compile(r"[^\W_]+")
_ASCII_WORD = re.compile(r"[a-z]+")
_STEMMER = Stemmer.Stemmer("english")
#: Every format character (category Cf) of Unicode 14 (Python 3.11's database; a test
#: checks this class against `unicodedata` of the running Python).
_FORMAT_CHARS = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)


def match_form(text: str) -> str:
    """NFKC of `text` without format characters (see module doc). ASCII is returned as is."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", _FORMAT_CHARS.sub("", text))


def visible(text: str) -> str:
    """`text` without format characters (Cf), stripped: empty when nothing a reader sees remains."""
    return text.strip() if text.isascii() else _FORMAT_CHARS.sub("", text).strip()


def canonical_forms(text: str) -> list[str]:
    """The distinct encodings of `text` a dedup probe must look for: as given, NFC, NFD."""
    if text.isascii():
        return [text]
    return list(dict.fromkeys((text, unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text))))


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def _bigrams(run: str) -> list[str]:
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _split(token: str, unigrams: bool = False) -> list[str]:
    """One letter/digit run → its tokens (stems, or bigrams for CJK/Hangul parts; the index
    also holds each CJK/Hangul character alone, for one-character queries such as 雨)."""
    if _ASCII_WORD.fullmatch(token):
        return [_stem(token)]
    if not _HAS_BIGRAM_SCRIPT.search(token):
        return [token]
    out: list[str] = []
    pos = 0
    for m in _BIGRAM_RUN.finditer(token):
        if m.start() > pos:
            out.append(token[pos : m.start()])
        run = m.group()
        out.extend(_bigrams(run))
        if unigrams and len(run) > 1:
            out.extend(run)
        pos = m.end()
    if pos < len(token):
        out.append(token[pos:])
    return out


def word_tokens(text: str) -> list[str]:
    """The word-index tokens of `text`, in order (see module doc)."""
    out: list[str] = []
    for token in _TOKEN.findall(match_form(text).casefold()):
        out.extend(_split(token, unigrams=True))
    return out


def is_bigram(term: str) -> bool:
    """Whether `term` is a CJK/Hangul token (a bigram or single character of those scripts)."""
    return bool(_BIGRAM_RUN.fullmatch(term))


def index_form(text: str) -> str:
    """What the word index stores for `text`: its tokens joined by spaces."""
    return " ".join(word_tokens(text))


def query_terms(query: str) -> list[str]:
    """Distinct word-index tokens of a query, first occurrence order, English function words
    (the trigram builder's list, compared before stemming) left out."""
    kept: list[str] = []
    for token in _TOKEN.findall(match_form(query).casefold()):
        if token in STOPWORDS:
            continue
        kept.extend(_split(token))
    return list(dict.fromkeys(kept))


def spellings(query: str) -> dict[str, list[str]]:
    """Each term of `query_terms(query)` → the words of the query it comes from (an English
    stem → its unstemmed spellings, `deploys` for `deploy`; any other term → itself)."""
    out: dict[str, list[str]] = {}
    for token in _TOKEN.findall(match_form(query).casefold()):
        if token in STOPWORDS:
            continue
        for term in _split(token):
            forms = out.setdefault(term, [])
            surface = token if _ASCII_WORD.fullmatch(token) else term
            if surface not in forms:
                forms.append(surface)
    return out


__all__ = ["canonical_forms", "index_form", "is_bigram", "match_form", "query_terms", "spellings", "visible",
           "word_tokens"]
