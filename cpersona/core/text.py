"""Text rules shared by every write and by the FTS retrievers.

* `sanitize` — the write-path content rule (spec tools.md §5 step 6).
* `normalize_source` — canonical `{type, id, name}` source objects (spec operations.md §16).
* `fts_match_expression` — the trigram MATCH builder (spec retrieval.md §2.4).
"""

from __future__ import annotations

import re
from typing import Any

_MARKER = re.compile(r"\[Memory from [^\]]+\]\s*")
#: CJK ranges of spec retrieval.md §2.4 (Hangul deliberately excluded).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\s{_CJK}]+")
_IS_CJK = re.compile(rf"[{_CJK}]")
#: Trigram tokenizer: shorter terms cannot match anything.
MIN_TERM_CHARS = 3


def sanitize(text: str, cap: int) -> tuple[str, bool]:
    """Remove `[Memory from …]` markers (and the whitespace after each), strip, cut to `cap`.

    Returns (clean text, truncated?). The text may come back empty; callers reject that.
    """
    clean = _MARKER.sub("", text).strip()
    if len(clean) > cap:
        return clean[:cap], True
    return clean, False


_TYPE_WORDS = {"user": "User", "agent": "Agent", "system": "System", "assistant": "Agent", "ai": "Agent", "session": "System"}
_CANONICAL = {"User", "Agent", "System"}


def normalize_source(source: Any) -> Any:
    """Map legacy source shapes to `{"type": User|Agent|System, "id", "name"}`.

    Unknown shapes are returned unchanged (never invent a discriminator); None → {}.
    """
    if source is None:
        return {}
    if isinstance(source, str):
        kind = {"user": "User", "assistant": "Agent", "ai": "Agent"}.get(source.strip().lower())
        return {"type": kind, "id": "", "name": ""} if kind else source
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


def fts_terms(query: str) -> list[str]:
    """Terms of the MATCH expression: CJK runs → overlapping 3-grams, other runs of ≥3
    chars kept whole (punctuation included: `CVE-2024-3094`), deduplicated in order."""
    terms: list[str] = []
    for run in _TOKEN.findall(query):
        if _IS_CJK.match(run):
            terms.extend(run[i : i + MIN_TERM_CHARS] for i in range(len(run) - MIN_TERM_CHARS + 1))
        elif len(run) >= MIN_TERM_CHARS:
            terms.append(run)
    return list(dict.fromkeys(terms))


def fts_match_expression(query: str) -> str:
    """`"t1" OR "t2" …` with inner quotes doubled; "" when the query has no usable term."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in fts_terms(query))
