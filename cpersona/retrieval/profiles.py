"""Profile rows in recall: accumulated attributes of an agent's user or project.

The server never synthesises a profile: `update_profile` stores the caller's text. Recall
adds up to `MAX_INJECTED` rows `[Profile] <text>` to the candidates — only when the gate's
pool (memories + episodes in the recall's scope) holds at least `gate.PROFILE_MIN_POOL` rows.
They carry no score and no ref, so with confidence scoring off they sort after every scored
row and are the first to be cut by `limit`.
"""

from __future__ import annotations

from cpersona.retrieval.candidate import PROFILE, Candidate
from cpersona.storage import Session

MAX_INJECTED = 3
PROFILE_PREFIX = "[Profile] "
PROFILE_SOURCE = {"System": "profile"}


def injection(session: Session, agent_id: str) -> list[Candidate]:
    """Profile candidates of `agent_id` (newest first, at most MAX_INJECTED); ids -1, -2, …
    keep their identities distinct (they have no row id a caller could use)."""
    texts = session.profiles.newest(agent_id, MAX_INJECTED)
    return [Candidate(PROFILE, -(i + 1), PROFILE_PREFIX + t, source=dict(PROFILE_SOURCE)) for i, t in enumerate(texts)]
