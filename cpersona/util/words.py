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
  split into runs of letters and digits, each cut again where the script changes (so
  `indexerで` and `indexer ` give the same word); English words reduced to their Snowball
  stem (Porter2, https://snowballstem.org — `uses`/`used` → `use`, but not `user`); runs of
  CJK ideographs, kana and Hangul (written without spaces, or with particles glued to the
  word) as overlapping character bigrams plus single characters, the standard units of
  CJK keyword retrieval (Kwok, "Comparing representations in Chinese information
  retrieval", SIGIR 1997), so a two-character word such as 广西, 设备 or 서울, or one
  character such as 雨, is findable; then one more token for each whole date (`yyyymmdd`,
  from `2024-01-07` or `2024年1月7日` alike) and each whole identifier (`ERR_DISK_9755` →
  `errdisk9755`), which its parts alone would not single out.
* `query_terms` — the distinct tokens of a query minus English function words and, like
  them, the Japanese ones: terms written only in hiragana (particles and inflections:
  があ, あっ, った), which are kept in the index as English function words are. English
  clitics are read first (`plain_query`): `who's`, `Mira's`, `we've` lose `'s` / `'ve`
  (otherwise a term `s` that every possessive in the store matches: "who's on call?" found
  "Mira's dog is called Biscuit" with every term matched), `don't` / `won't` read as
  `do` / `will`.

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
#: A run of one script class: CJK/Hangul, or anything else.
_SCRIPT_RUN = re.compile(f"[{_BIGRAM_SCRIPTS}]+|[^{_BIGRAM_SCRIPTS}]+")
_HIRAGANA = re.compile("[\u3041-\u309f]+")
#: Dates written year first: ISO and slashed (2024-01-07, 2024/1/7) and Japanese (2024年1月7日).
_DATE = re.compile(r"(?<![0-9])([0-9]{4})(?:[-/.]|年)([0-9]{1,2})(?:[-/.]|月)([0-9]{1,2})(?![0-9])")
#: Latin letters and digits joined by `_ - . /` (identifiers, versions, paths, hyphenated words).
_IDENTIFIER = re.compile(r"(?<![a-z0-9_./-])[a-z0-9]+(?:[_./-][a-z0-9]+)+")
_JOINER = re.compile(r"[_./-]")
_LETTER = re.compile(r"[a-z]")
#: What sets an identifier apart from a hyphenated word (`follow-up`, `search-indexer`).
_MARKED = re.compile(r"[0-9_]")
#: The version of `index_form`: bump it whenever the tokens of any text change; a store whose
#: word index was written in another version re-tokenises every memory when next opened.
WORD_FORM_VERSION = 2
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


def _split(token: str, unigrams: bool = False, stop: frozenset[str] = frozenset()) -> list[str]:
    """One letter/digit run → its tokens. The run is first cut where the script changes
    (`indexerで` → `indexer` + `で`), so a word gives the same token whether a space or a
    particle follows it: a Latin part is stemmed as a word of its own, a CJK/Hangul part
    becomes bigrams (the index also holds each CJK/Hangul character alone, for one-character
    queries such as 雨). `stop`: Latin words to leave out (the query's function words)."""
    if not _HAS_BIGRAM_SCRIPT.search(token):
        if token in stop:
            return []
        return [_stem(token)] if _ASCII_WORD.fullmatch(token) else [token]
    out: list[str] = []
    for part in _SCRIPT_RUN.findall(token):
        if not _HAS_BIGRAM_SCRIPT.match(part):
            out.extend(_split(part, stop=stop))
            continue
        out.extend(_bigrams(part))
        if unigrams and len(part) > 1:
            out.extend(part)
    return out


def _whole_forms(text: str) -> list[str]:
    """The extra tokens of whole identifiers and dates in a casefolded match form: a date
    (`2024-01-07`, `2024/1/7`, `2024年1月7日`) as one `yyyymmdd` token, whatever its
    notation; an identifier — Latin letters and digits joined by `_ - . /`, with a letter and
    a digit or an underscore (`err_disk_9755`, `polaris2-cli`, `v2.14.0`, `retry_cron.yaml`)
    — as its parts written together (`errdisk9755`). A hyphenated word (`follow-up`) is not an
    identifier. The parts are tokens too; the whole form lets a row holding the whole
    identifier or date outscore rows that hold only some of its parts (`err`, `2024`, `7`)."""
    out = [f"{int(y):04d}{int(m):02d}{int(d):02d}" for y, m, d in _DATE.findall(text)
           if 1 <= int(m) <= 12 and 1 <= int(d) <= 31]
    out.extend(_JOINER.sub("", m) for m in _IDENTIFIER.findall(text) if _LETTER.search(m) and _MARKED.search(m))
    return out


def _tokens(text: str, unigrams: bool, stop: frozenset[str]) -> list[str]:
    form = match_form(text).casefold()
    out: list[str] = []
    for token in _TOKEN.findall(form):
        out.extend(_split(token, unigrams, stop))
    out.extend(_whole_forms(form))
    return out


def word_tokens(text: str) -> list[str]:
    """The word-index tokens of `text`, in order (see module doc)."""
    return _tokens(text, True, frozenset())


#: Runs of a stored text up to this many characters have their split cached (`_row_split`):
#: words recur row after row, long CJK runs (whole clauses) rarely do, and each entry stays
#: small (≤ 31 tokens).
CACHED_RUN = 16


@lru_cache(maxsize=16384)
def _row_split(token: str) -> tuple[str, ...]:
    """The tokens of one letter/digit run of a stored text (`_split` with unigrams), for runs
    of at most `CACHED_RUN` characters; cached like `_stem`: the split is a function of the run
    alone, and SCALE's 10k rows hold 1M runs but only 8.9k distinct short ones (~4 MB)."""
    return tuple(_split(token, True))


def word_token_set(text: str) -> frozenset[str]:
    """The distinct word-index tokens of `text`: `frozenset(word_tokens(text))` in ~¾ of its
    time (short runs' splits read from `_row_split`)."""
    form = match_form(text).casefold()
    out: set[str] = set()
    for token in _TOKEN.findall(form):
        out.update(_row_split(token) if len(token) <= CACHED_RUN else _split(token, True))
    out.update(_whole_forms(form))
    return frozenset(out)


def is_bigram(term: str) -> bool:
    """Whether `term` is a CJK/Hangul token (a bigram or single character of those scripts)."""
    return bool(_BIGRAM_RUN.fullmatch(term))


def is_function_kana(term: str) -> bool:
    """Whether `term` is written in hiragana only: in Japanese text these are mostly
    particles and inflections (があ, あっ, った, して), not what a question is about."""
    return bool(_HIRAGANA.fullmatch(term))


def index_form(text: str) -> str:
    """What the word index stores for `text`: its tokens joined by spaces."""
    return " ".join(word_tokens(text))


#: An English clitic after a word: 's (is / has / possessive), 'd, 'm, 'll, 've, 're; any apostrophe form.
_CLITIC = re.compile(r"(?<=[^\W\d_])['’＇](?:s|d|m|ll|ve|re)\b", re.IGNORECASE)
#: A negation contraction: `don't` → `do`; the stems that change form are listed.
_NEGATION = re.compile(r"\b([^\W\d_]+?)n['’＇]t\b", re.IGNORECASE)
_NEGATED = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}


def plain_query(query: str) -> str:
    """`query` with English clitics read (module doc): `who's on call` → `who on call`."""
    query = _NEGATION.sub(lambda m: _NEGATED.get(m.group(1).casefold(), m.group(1)), query)
    return _CLITIC.sub("", query)


def query_terms(query: str) -> list[str]:
    """Distinct word-index tokens of a query, first occurrence order, English clitics read
    (`plain_query`), English function words (the trigram builder's list, compared before
    stemming) left out, and terms written in hiragana only (`is_function_kana`) left out too
    unless the query has nothing else."""
    terms = list(dict.fromkeys(_tokens(plain_query(query), False, STOPWORDS)))
    content = [t for t in terms if not is_function_kana(t)]
    return content or terms


def spellings(query: str) -> dict[str, list[str]]:
    """Each term of `query_terms(query)` → the words of the query it comes from (an English
    stem → its unstemmed spellings, `deploys` for `deploy`; any other term → itself)."""
    out: dict[str, list[str]] = {}
    for token in _TOKEN.findall(match_form(plain_query(query)).casefold()):
        for part in _SCRIPT_RUN.findall(token):
            for term in _split(part, stop=STOPWORDS):
                surface = part if _ASCII_WORD.fullmatch(part) else term
                forms = out.setdefault(term, [])
                if surface not in forms:
                    forms.append(surface)
    return {term: out.get(term, [term]) for term in query_terms(query)}


__all__ = ["canonical_forms", "index_form", "is_bigram", "is_function_kana", "match_form", "plain_query", "query_terms",
           "spellings", "visible", "word_token_set", "word_tokens"]
