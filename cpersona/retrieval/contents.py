"""get_contents: the full text of the rows a recall answered as previews (service/answers.py),
by ref, owned by the asking agent.

It never cuts a row: it returns whole items until the next one would exceed `CONTENTS_BUDGET`
(the first is always returned) and lists that ref and every later one in `deferred`, with a
note saying to ask for them again.
"""

from __future__ import annotations

from typing import Any

from cpersona.errors import InvalidArgument
from cpersona.retrieval.retrievers import episode_candidate
from cpersona.storage import Session
from cpersona.util.jsonutil import loads_or_empty

CONTENTS_BUDGET = 40_000
MAX_REFS = 20
MAX_REF_CHARS = 64


def parse_refs(refs: Any) -> list[str]:
    """Validate the refs argument: a list of 1..MAX_REFS strings (malformed refs are not
    errors — they come back in `missing`)."""
    if not isinstance(refs, (list, tuple)) or not refs:
        raise InvalidArgument("refs", "must be a non-empty list of refs like 'mem:12' or 'ep:3'")
    if len(refs) > MAX_REFS:
        raise InvalidArgument("refs", f"has {len(refs)} items; the limit is {MAX_REFS} per call")
    for i, ref in enumerate(refs):
        if not isinstance(ref, str):
            raise InvalidArgument(f"refs[{i}]", f"must be a string, got {type(ref).__name__}")
        if len(ref) > MAX_REF_CHARS:
            raise InvalidArgument(f"refs[{i}]", f"is {len(ref)} characters; a ref is at most {MAX_REF_CHARS}")
    return list(dict.fromkeys(refs))


def _split(ref: str) -> tuple[str, int] | None:
    """("mem" | "ep", id) of "mem:12", "ep:3", or a bare number "12" (a memory, as the row
    tools read it); None for any other form."""
    kind, sep, num = ref.strip().partition(":")
    if not sep:
        kind, num = "mem", kind
    if kind not in ("mem", "ep") or not num.isascii() or not num.isdigit():
        return None
    value = int(num)
    return (kind, value) if 0 < value < 2**63 else None  # beyond SQLite's rowid range: missing


def _item(session: Session, agent_id: str, ref: str) -> dict[str, Any] | None:
    parsed = _split(ref)
    if parsed is None:
        return None
    kind, row_id = parsed
    if kind == "mem":
        row = session.memories.owned(row_id, agent_id)
        if row is None:
            return None
        content, source_text, timestamp, msg_id = row
        item: dict[str, Any] = {"ref": f"mem:{row_id}", "content": content}
        source = loads_or_empty(source_text)
        if source:
            item["source"] = source
        if timestamp:
            item["timestamp"] = timestamp
        if msg_id:
            item["id"] = msg_id
        return item
    episode = session.episodes.owned(row_id, agent_id)
    if episode is None:
        return None
    cand = episode_candidate(episode)
    return {"ref": f"ep:{row_id}", "content": cand.content, "source": cand.source, "timestamp": cand.timestamp,
            "resolved": cand.resolved}


def get_contents(session: Session, agent_id: str, refs: list[str]) -> dict[str, Any]:
    """Expand refs owned by `agent_id`: {items, missing, count, deferred?, budget_chars?, note?,
    malformed?, malformed_note?}. A ref is "mem:N", "ep:N" or a bare memory number "N".
    Another agent's row is `missing`, exactly like an absent one; a ref in none of the
    accepted forms is also listed in `malformed`, with the forms accepted. Refs naming one
    row (`12`, `mem:12`) are expanded once."""
    items: list[dict[str, Any]] = []
    missing: list[str] = []
    deferred: list[str] = []
    total = 0
    seen: set[tuple[str, int]] = set()
    for ref in refs:
        key = _split(ref)
        if key is not None and key in seen:  # `12`, `mem:12` and ` 12` name one row: expanded once
            continue
        if key is not None:
            seen.add(key)
        if deferred:
            deferred.append(ref)
            continue
        item = _item(session, agent_id, ref)
        if item is None:
            missing.append(ref)
            continue
        size = len(item["content"])
        if items and total + size > CONTENTS_BUDGET:
            deferred.append(ref)
            continue
        items.append(item)
        total += size
    out: dict[str, Any] = {"items": items, "missing": missing, "count": len(items)}
    if deferred:
        out.update(deferred=deferred, budget_chars=CONTENTS_BUDGET,
                   note=f"{len(deferred)} ref(s) not expanded to stay within {CONTENTS_BUDGET} characters; "
                        "call get_contents again with the deferred refs")
    if malformed := [ref for ref in missing if _split(ref) is None]:
        out["malformed"] = malformed
        out["malformed_note"] = "a ref is 'mem:N', 'ep:N' or a memory's number 'N' (as recall and list print them)"
    return out
