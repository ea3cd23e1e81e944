"""The rules a bearer token must meet before the HTTP transport accepts it as a secret.

A token travels in `Authorization: Bearer <token>`, so it must be a `b64token` of RFC 6750
§2.1 (letters, digits and `-._~+/`, optionally ending in `=`): no whitespace, nothing
outside ASCII. A non-ASCII token could never be presented in an HTTP header (headers are
bytes; every client encodes them differently), and whitespace is where a token read from a
file picks up a newline — both would lock every client out while looking configured.
Nothing is trimmed: a token with stray whitespace is refused, naming the rule.

Minimum strength: at least MIN_LENGTH (32) characters with at least MIN_DISTINCT (8)
different characters. 32 characters is what `openssl rand -hex 16` (128 random bits)
or `python -c "import secrets; print(secrets.token_urlsafe(24))"` print; 128 bits is the
security level NIST SP 800-57 Part 1 gives for secrets that must stay safe beyond 2030, far
past online guessing and offline search. A length rule cannot measure randomness, so the
distinct-character rule only stops the obvious fillers ("aaaa…", "0000…").
"""

from __future__ import annotations

import re

from cpersona.errors import ConfigError

#: Shortest accepted token, in characters (128 bits as 32 hex digits).
MIN_LENGTH = 32
#: Fewest distinct characters in a token (rejects repeated-character fillers).
MIN_DISTINCT = 8
#: RFC 6750 §2.1 b64token.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: How to make a good token, quoted in every refusal.
HOW_TO = "e.g. `python -c \"import secrets; print(secrets.token_urlsafe(32))\"`"


def token_syntax_problem(token: str) -> str | None:
    """Why `token` cannot travel as an HTTP bearer token, or None when it can."""
    if token != token.strip():
        return "has leading or trailing whitespace (a newline from a file?); remove it — nothing is trimmed"
    if not token.isascii():
        return "contains non-ASCII characters; HTTP headers carry ASCII only"
    if not _B64TOKEN.fullmatch(token):
        return "may contain only letters, digits and -._~+/ (optionally ending in =), RFC 6750 §2.1"
    return None


def token_problem(token: str) -> str | None:
    """Why `token` is unusable as a server secret (syntax or strength), or None."""
    problem = token_syntax_problem(token)
    if problem is not None:
        return problem
    if len(token) < MIN_LENGTH:
        return f"is {len(token)} characters; at least {MIN_LENGTH} are required ({HOW_TO})"
    if len(set(token)) < MIN_DISTINCT:
        return f"uses fewer than {MIN_DISTINCT} distinct characters; use a random token ({HOW_TO})"
    return None


def check_token(token: str, where: str) -> None:
    """Raise ConfigError("<where> <problem>") when `token` breaks a rule. The token itself
    never appears in the message."""
    problem = token_problem(token)
    if problem is not None:
        raise ConfigError(f"{where} {problem}")
