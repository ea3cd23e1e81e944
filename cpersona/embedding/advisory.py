"""Degraded-search advisory: tells the agent when recall runs
without vectors, or without the full-text index, so a worse answer is never silent.

States: unknown → healthy | hint | loading | fault; plus a standing `notice` (vectors of a
previous model awaiting re-embedding) reported as `reembed` while otherwise healthy, and a
standing `keyword` condition (the full-text index is unusable on this SQLite: keyword
search is LIKE substring matching) reported next to any of them — one payload whose
reason, evidence and runbook name every active condition.
* hint    — embeddings not configured (mode none): static.
* loading — the bundled model is still loading in the background.
* fault   — a configured backend failed twice in a row (one blip is forgiven);
            cleared by the next successful embed.
* mismatch — this process embeds with another model than the one that made the stored
            vectors (and may not change the database's record): keyword search only.
* late    — not a state: one recall whose query vector did not arrive within
            CPERSONA_EMBED_WAIT_SECS (backend busy or stalled) answered from keywords;
            named in that recall's payload only (`payload(late=...)`).
The first advisory of an episode carries the full runbook, later ones a short reminder.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

#: Consecutive failures before the state becomes `fault`.
FAULT_AFTER = 2

_RUNBOOKS = {
    "hint": (
        "Tell the user once: semantic (vector) search is off, so recall matches words, not meaning. "
        "To enable it: pip install 'cpersona-memory[embed]' (bundled model, no network) or set "
        "CPERSONA_EMBEDDING_URL to an /embed server, then restart. "
        "To silence this notice set CPERSONA_DEGRADED_ADVISORY=false."
    ),
    "loading": "The embedding model is loading; this recall used keyword search only. Retry shortly.",
    "fault": (
        "Tell the user: the embedding backend is failing, so recall is keyword-only and misses "
        "paraphrases. The evidence names the backend (mode=...). mode=local, the bundled model: the "
        "server's log on stderr says why its worker process failed; restart cpersona. mode=http: check "
        "that the /embed server is running and reachable at the configured CPERSONA_EMBEDDING_URL "
        "(curl -X POST it with {\"texts\":[\"x\"]}); mode=api: the endpoint and its key. Memories "
        "stored meanwhile are kept and embedded later. "
        "To silence this notice set CPERSONA_DEGRADED_ADVISORY=false."
    ),
}
_RUNBOOKS["reembed"] = (
    "Tell the user: the embedding model changed, so memories embedded by the previous model are "
    "left out of semantic search until they are re-embedded. The server re-embeds them in the "
    "background while its task queue runs (progress: get_queue_status → reembed, or `cpersona stats`); "
    "`cpersona reembed` with "
    "the server's CPERSONA_* settings does it now (safe to interrupt and resume). Keyword search "
    "still covers every memory."
)
_RUNBOOKS["mismatch"] = (
    "Tell the user: this process embeds with a different model than the one that made the stored "
    "vectors, so this recall used keyword search only. Run it with the embedding settings "
    "(CPERSONA_EMBEDDING_*) the server uses, or switch the database to this model with "
    "`cpersona reembed` (re-embeds every memory; resumable)."
)
_RUNBOOKS["late"] = (
    "The embedding backend did not embed this recall's query in time (it is busy with a large batch, or "
    "stalled), so this recall used keyword search only. Retry shortly; if every recall says this, tell the user "
    "and see the server's log on stderr."
)
_RUNBOOKS["keyword"] = (
    "Tell the user: this SQLite cannot use the full-text index, so keyword recall only finds memories "
    "containing the query text verbatim, unranked. To restore it, run cpersona with a Python whose SQLite has "
    "FTS5 with the trigram tokenizer (SQLite 3.34 or newer); the index is rebuilt at the next start. Memories "
    "are stored normally meanwhile. To silence this notice set CPERSONA_DEGRADED_ADVISORY=false."
)
_REASONS = {
    "reembed": "stored vectors come from another embedding model; some rows are keyword-only",
    "hint": "embeddings disabled; keyword/FTS only",
    "loading": "embedding model loading; keyword/FTS only",
    "fault": "embedding backend failing; keyword/FTS only",
    "keyword": "full-text index unavailable; keyword search is LIKE substring matching",
    "mismatch": "embedding model differs from the stored vectors' model; keyword/FTS only",
    "late": "query embedding not ready in time; keyword/FTS only",
}
_SEVERITY = {"hint": "hint", "loading": "hint", "fault": "fault", "reembed": "hint", "keyword": "fault",
             "mismatch": "fault", "late": "fault"}


@dataclass
class AdvisoryState:
    state: str = "unknown"
    evidence: str = ""
    consecutive_failures: int = 0
    emitted: bool = False
    notice: str | None = None
    keyword: str | None = None


class Advisory:
    """Process-level state machine; thread-safe. `enabled=False` never emits a payload."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._s = AdvisoryState()
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        return self._s.state

    @property
    def failing(self) -> bool:
        """True after a failed embed or while loading, until the next success."""
        return self._s.consecutive_failures > 0 or self._s.state in ("fault", "loading", "mismatch")

    def _enter(self, state: str, evidence: str) -> None:
        if self._s.state != state:
            self._s.emitted = False
        self._s.state, self._s.evidence = state, evidence

    def disabled(self, evidence: str) -> None:
        """Embeddings are not configured (mode none)."""
        with self._lock:
            self._enter("hint", evidence)

    def loading(self, evidence: str) -> None:
        """The in-process model is not ready yet."""
        with self._lock:
            if self._s.state not in ("fault", "mismatch"):
                self._enter("loading", evidence)

    def observe_ok(self) -> None:
        """An embed succeeded: the backend is healthy again."""
        with self._lock:
            self._s.consecutive_failures = 0
            self._enter("healthy", "")

    def observe_failure(self, evidence: str) -> None:
        """An embed failed; after FAULT_AFTER in a row the state becomes fault."""
        with self._lock:
            self._s.consecutive_failures += 1
            if self._s.consecutive_failures >= FAULT_AFTER:
                self._enter("fault", evidence)

    def mismatch(self, evidence: str) -> None:
        """This process's model differs from the stored vectors' (not a passing failure:
        entered at once; left by the next successful embed)."""
        with self._lock:
            self._s.consecutive_failures = max(self._s.consecutive_failures, FAULT_AFTER)
            self._enter("mismatch", evidence)

    def set_notice(self, evidence: str | None) -> None:
        """A standing condition shown while the backend is otherwise healthy, e.g. vectors
        of a previous model awaiting `cpersona reembed`. None clears it."""
        with self._lock:
            if evidence != self._s.notice:
                self._s.notice = evidence
                self._s.emitted = False

    def set_keyword_problem(self, evidence: str | None) -> None:
        """The full-text index cannot be used (e.g. no trigram tokenizer in this SQLite);
        None clears it."""
        with self._lock:
            if evidence != self._s.keyword:
                self._s.keyword = evidence
                self._s.emitted = False

    def payload(self, late: str | None = None) -> dict | None:
        """The `advisory` object for a recall response, or None when healthy/disabled.
        `late`: evidence that this recall's query vector did not arrive in time (reported
        whatever the state; the full runbook each time)."""
        with self._lock:
            state = self._s.state
            if state in ("healthy", "unknown") and self._s.notice:
                state, self._s.evidence = "reembed", self._s.notice
            active = [(state, self._s.evidence)] if state in _REASONS and state not in ("keyword", "late") else []
            if late:
                active.append(("late", late))
                self._s.emitted = False
            if self._s.keyword:
                active.append(("keyword", self._s.keyword))
            if not self.enabled or not active:
                return None
            full = not self._s.emitted
            self._s.emitted = True
            reason = "; ".join(_REASONS[s] for s, _ in active)
            evidence = "; ".join(e for _, e in active)
            return {
                "degraded": True,
                "severity": "fault" if any(_SEVERITY[s] == "fault" for s, _ in active) else "hint",
                "reason": reason,
                "evidence": evidence,
                "runbook": "\n\n".join(_RUNBOOKS[s] for s, _ in active) if full
                else f"Still degraded: {reason} ({evidence}).",
            }
