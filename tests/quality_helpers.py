"""Helpers of the quality-layer tests: an in-process hashing embedder and a
corpus with session structure, so calibration has something to measure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from cpersona.config import Settings
from cpersona.devtools.fake_embed import fake_vector
from cpersona.service.engine import Engine
from cpersona.service.requests import RecallRequest

TOPICS = [
    ("kubernetes", "cluster pods deployment rollout ingress helm nodes"),
    ("gardening", "tomatoes basil compost seedlings watering soil mulch"),
    ("finance", "invoice budget ledger quarterly expenses payroll audit"),
    ("cooking", "recipe simmer garlic onions saucepan oven bake"),
    ("astronomy", "telescope nebula galaxy orbit comet planets eclipse"),
]


class HashEmbedder:
    """Deterministic in-process backend (hashed words and trigrams, 512-d)."""

    mode = "http"
    dim = 512

    def __init__(self, model_id: str = "hash-512") -> None:
        self.model_id = model_id
        self.calls = 0

    def ready(self) -> bool:
        return True

    def embed(self, texts):
        self.calls += 1
        return np.stack([fake_vector(t, self.dim) for t in texts])

    def close(self) -> None:
        pass


def make(db: Path | str, embedder: Any = "hash", **overrides: Any) -> Engine:
    """Engine on `db` with the hashing backend (embedder=None → mode none)."""
    overrides.setdefault("calibrate_on_model_change", False)
    overrides.setdefault("calibrate_min_rows", 10)  # the corpora here are small (session_corpus: 70 rows)
    settings = Settings.from_env({}, db_path=str(db), **overrides)
    backend = HashEmbedder() if embedder == "hash" else embedder
    return Engine(settings, embedder=backend)


def session_corpus(n_sessions: int = 5, per_session: int = 14, start: str = "2026-01-05T09:00:00+00:00") -> list[tuple[str, str]]:
    """(content, timestamp) rows: one topic per session, sessions two days apart, turns
    two minutes apart — same-session rows share words, other sessions do not."""
    t0 = datetime.fromisoformat(start)
    rows = []
    for s in range(n_sessions):
        topic, words = TOPICS[s % len(TOPICS)]
        vocab = words.split()
        for i in range(per_session):
            picked = " ".join(vocab[(i + k) % len(vocab)] for k in range(3))
            ts = t0 + timedelta(days=2 * s, minutes=2 * i)
            rows.append((f"{topic} note {s}-{i}: {picked}", ts.isoformat()))
    return rows


def store_rows(engine: Engine, rows, agent: str = "a", **kw: Any) -> list[int]:
    ids = []
    for content, ts in rows:
        res = engine.store(agent, content, timestamp=ts, **kw)
        assert res["result"] == "stored", res
        ids.append(res["id"])
    return ids


def store_all(engine: Engine, texts: list[str], agent: str = "a", **kw: Any) -> list[int]:
    """Store each text (no timestamp: now) and return the ids; asserts each was stored."""
    ids = []
    for text in texts:
        res = engine.store(agent, text, **kw)
        assert res["result"] == "stored", res
        ids.append(res["id"])
    return ids


def recall(engine: Engine, query: str, agent: str = "a", trace: dict | None = None, **kw: Any) -> dict:
    return engine.recall(RecallRequest(agent, query, **kw), trace=trace)


def contents(res: dict) -> list[str]:
    return [m["content"] for m in res["messages"]]


def utc(days: float = 0.0) -> str:
    return (datetime.now(UTC) + timedelta(days=days)).isoformat()


#: A small ops store: the CVE row holds every word of the near-miss question but its number.
OPS_NOTES = (
    "CVE-2024-3094: the xz-utils 5.6.0 and 5.6.1 backdoor in liblzma; we pinned xz-utils 5.4.6 on every "
    "build host and rebuilt the sshd images.",
    "CVE-2023-4863: the libwebp heap overflow; Chrome and the image service were patched on 2023-09-14.",
    "The staging database moved to port 5433 after the upgrade.",
    "Deploys go out on Thursdays after the 14:00 review.",
    "We use GitHub Actions for CI and Renovate for dependency updates.",
    "Postgres 16 runs the billing service; backups are taken nightly at 02:00.",
    "The on-call rotation changes every Monday at 09:00.",
    "Security advisories are triaged within one business day by the platform team.",
    "Build hosts run Debian 12 with unattended upgrades disabled.",
    "Caroline leads the platform team and owns the build hosts.",
    "Melanie painted a lake sunrise for the office kitchen.",
)
ANCHOR_NEAR_MISS = "How did we fix the xz-utils backdoor CVE-2024-3095 on the build hosts?"
ANCHOR_EXACT = "How did we fix the xz-utils backdoor CVE-2024-3094 on the build hosts?"
