"""Obvious secrets in text that is about to be stored without a person choosing each word
(the host hooks keep whole conversation turns): each match is replaced by `[redacted <kind>]`
and counted by kind; the secret itself is never logged or returned.

The table holds the published shapes of common credentials — their issuers' documented
prefixes and lengths — plus PEM private-key blocks and `name = value` assignments whose name
says key / token / secret / password. It catches the obvious, not every secret: text a person
typed on purpose (`store`) is not rewritten.

Sources for the prefixes: AWS access key ids (AKIA / ASIA + 16, IAM docs "Understanding unique
ID prefixes"), GitHub tokens (ghp_ gho_ ghu_ ghs_ ghr_, github_pat_: "About authentication to
GitHub"), Slack tokens (xoxb- xoxp- xoxa- xoxr- xoxs-), Stripe secret / restricted keys
(sk_live_ / rk_live_), Google API keys (AIza + 35), Anthropic (sk-ant-) and OpenAI (sk-, sk-proj-)
API keys, JSON Web Tokens (RFC 7519: three base64url parts, the first two starting `eyJ`),
PEM (RFC 7468) `-----BEGIN … PRIVATE KEY-----` blocks.
"""

from __future__ import annotations

import re
from collections import Counter

#: kind → pattern. Order matters: an earlier kind is replaced first (a PEM block before the
#: key=value rule could cut into it). The replacement keeps a `name =` prefix (group "keep").
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
                               re.S)),
    ("anthropic key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("openai key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("github token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("aws access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("stripe key", re.compile(r"\b[rs]k_live_[A-Za-z0-9]{16,}")),
    ("google api key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("json web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("bearer token", re.compile(r"(?P<keep>\bBearer\s+)[A-Za-z0-9._~+/-]{20,}=*", re.I)),
    ("assigned secret", re.compile(
        r"(?P<keep>\b[\w.-]*(?:api[_-]?key|access[_-]?key|secret|token|passw(?:or)?d|passwd)[\w.-]*"
        r"[\"']?\s*[:=]\s*[\"']?)(?![\"']?\[redacted)[^\s\"'`,;]{8,}", re.I)),
)


def redact(text: str) -> tuple[str, Counter[str]]:
    """`text` with every match of PATTERNS replaced by `[redacted <kind>]`, and how many of
    each kind were replaced (an empty Counter when none)."""
    counts: Counter[str] = Counter()
    for kind, pattern in PATTERNS:
        def replace(match: re.Match[str], kind: str = kind) -> str:
            counts[kind] += 1
            keep = match.groupdict().get("keep") or ""
            return f"{keep}[redacted {kind}]"

        text = pattern.sub(replace, text)
    return text, counts
