"""Text rules shared by every write and by the keyword retrievers.

* `sanitize` — the write-path content rule (markers stripped, text cut to the cap).
* `normalize_source` — canonical `{type, id, name}` source objects .
* `fts_terms` / `match_expression` — the trigram MATCH builder: terms of ≥ 3 characters,
  CJK runs as overlapping 3-grams (the FTS5 trigram tokenizer cannot match shorter terms).
"""

from __future__ import annotations

import re
from typing import Any

_MARKER = re.compile(r"\[Memory from [^\]]+\]\s*")
#: CJK ranges written without spaces between words (Hangul uses spaces and is excluded).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f"
_IS_CJK = re.compile(rf"[{_CJK}]")
#: Inside a CJK chunk, trigrams run over CJK characters and the digits written with them
#: (`天正10年`, `ルイ13世`) — but not digits that belong to an ASCII identifier
#: (`ERR_TLS_7841への対応`, `limits34.rsで`), which stay in that identifier's word.
_CJK_RUN = re.compile(rf"(?:[{_CJK}]|(?<![A-Za-z0-9_.\-/:])[0-9\uff10-\uff19]+(?![A-Za-z0-9_.\-/:]*[A-Za-z_]))+")
#: Chunks: maximal runs of word characters and identifier joiners (CJK are word chars).
_CHUNK = re.compile(r"[\w\-./:@#+]+")
#: Trigram tokenizer: shorter terms cannot match anything.
MIN_TERM_CHARS = 3
#: Inside a non-CJK run, words are split on anything but letters, digits and the joiners
#: that make identifiers (`CVE-2024-3094`, `src/app.py:42`, `user@host`, `c++`, `#123`);
#: joiners at a word's edge are sentence punctuation and are trimmed.
_WORD_SPLIT = re.compile(r"[^\w\-./:@#+]+")
_EDGE = "-./:@#+_"
#: English function words: as trigram OR-terms they match almost every row and only add
#: noise to bm25 (the same list as the reference lexical baseline of the data sets).
STOPWORDS = frozenset(
    [
        "the", "a", "an", "of", "to", "in", "on", "at", "for", "and", "or", "is", "was", "were", "be", "been", "did",
        "does", "do", "what", "when", "where", "which", "who", "whom", "why", "how", "i", "my", "me", "you", "your",
        "it", "its", "that", "this", "with", "from", "by", "as", "are", "have", "has", "had", "would", "could",
        "should", "will", "can", "about", "any", "there", "their", "they", "them", "he", "she", "his", "her", "we",
        "our", "us", "not", "no", "yes",
    ]
)


def strip_markers(text: str) -> str:
    """`text` without its `[Memory from …]` markers (and the whitespace after each),
    stripped; `text` unchanged when it holds no marker."""
    clean = _MARKER.sub("", text)
    return clean.strip() if clean != text else text


def sanitize(text: str, cap: int) -> tuple[str, bool]:
    """Remove `[Memory from …]` markers (and the whitespace after each), strip, cut to `cap`.

    Returns (clean text, truncated?). The text may come back empty; callers reject that.
    """
    clean = _MARKER.sub("", text).strip()
    if len(clean) > cap:
        return clean[:cap], True
    return clean, False


_TYPE_WORDS = {
    "user": "User", "agent": "Agent", "system": "System", "assistant": "Agent", "ai": "Agent", "session": "System",
}
_CANONICAL = {"User", "Agent", "System"}


def normalize_source(source: Any) -> Any:
    """Map legacy source shapes to `{"type": User|Agent|System, "id", "name"}`.

    A plain string naming a role ("user", "assistant", "ai") becomes that role; any other
    plain string names the speaker: `{"id": s, "name": s}` (no type is invented), so
    `source_id` filters find it; a blank string or None → {}. Unknown object shapes are
    returned unchanged (never invent a discriminator).
    """
    if source is None:
        return {}
    if isinstance(source, str):
        name = source.strip()
        kind = {"user": "User", "assistant": "Agent", "ai": "Agent"}.get(name.lower())
        if kind:
            return {"type": kind, "id": "", "name": ""}
        return {"id": name, "name": name} if name else {}
    if not isinstance(source, dict):
        return source
    kind = source.get("type")
    if isinstance(kind, str):
        if kind in _CANONICAL:
            return source
        mapped = _TYPE_WORDS.get(kind.strip().lower())
        return {**source, "type": mapped} if mapped else source
    if "type" not in source and len(source) == 1:
        return _from_tagged(*next(iter(source.items())))
    return source


def _from_tagged(tag: str, inner: Any) -> Any:
    if tag not in _CANONICAL:
        return {tag: inner}
    if isinstance(inner, dict):
        return {"id": "", "name": "", **inner, "type": tag}
    if isinstance(inner, str):
        return {"type": tag, "id": inner, "name": "" if tag == "System" else inner}
    return {tag: inner}


def _words(run: str) -> list[str]:
    words = (w.strip(_EDGE) for w in _WORD_SPLIT.split(run))
    return [w for w in words if len(w) >= MIN_TERM_CHARS and w.lower() not in STOPWORDS]


def fts_terms(query: str) -> list[str]:
    """Terms of the FTS5 MATCH expression of `query`.

    The query is cut into chunks at whitespace and sentence punctuation. In a chunk holding
    CJK characters, each run of CJK characters and digits → its overlapping 3-grams (so
    `天正10年` and `ルイ13世` match although their CJK parts are shorter than 3), and the
    rest of the chunk → words as below. Other chunks → words of ≥ 3 chars keeping inner identifier
    punctuation (`CVE-2024-3094`, `ERR_TIMEOUT_1750`, `src/app.py:42`) but not sentence
    punctuation at their edges (`group?` → `group`), minus English stopwords.
    Deduplicated case-insensitively, first occurrence order.
    """
    terms: list[str] = []
    for chunk in _CHUNK.findall(query):
        if _IS_CJK.search(chunk):
            for run in _CJK_RUN.findall(chunk):
                terms.extend(_trigrams(run))
            terms.extend(_words(_CJK_RUN.sub(" ", chunk)))
        else:
            terms.extend(_words(chunk))
    seen: dict[str, str] = {}
    for term in terms:
        seen.setdefault(term.lower(), term)
    return list(seen.values())


def _trigrams(chunk: str) -> list[str]:
    return [chunk[i : i + MIN_TERM_CHARS] for i in range(len(chunk) - MIN_TERM_CHARS + 1)]


def match_expression(terms: list[str]) -> str:
    """`"t1" OR "t2" …` with inner quotes doubled; "" for no terms."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
