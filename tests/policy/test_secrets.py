"""Obvious secrets are replaced before a hook stores a turn (policy/secrets.py); ordinary
text — including words like "token" or "password" in prose — is kept."""

from __future__ import annotations

import pytest
from cpersona.policy.secrets import redact

#: Fakes of each published shape, built so no real credential sits in the source.
SHAPES = [
    ("anthropic key", "sk-ant-api03-" + "a1B2" * 10),
    ("openai key", "sk-proj-" + "Xy9_" * 8),
    ("github token", "ghp_" + "A1b2C3d4E5" * 4),
    ("github token", "github_pat_" + "11ABCDEFG0" * 5),
    ("aws access key", "AKIA" + "ABCDEFGHIJKLMNOP"),
    ("slack token", "xoxb-1234567890-abcdefghij"),
    ("stripe key", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("google api key", "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"[:35]),
    ("json web token", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
]


@pytest.mark.parametrize("kind, secret", SHAPES)
def test_each_published_shape_is_redacted(kind, secret):
    text, counts = redact(f"use {secret} for the deploy")
    assert secret not in text and f"[redacted {kind}]" in text and counts == {kind: 1}


def test_private_keys_bearer_tokens_and_assignments():
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAA\n-----END OPENSSH PRIVATE KEY-----"
    text, counts = redact(f"key:\n{pem}\nthen curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345' "
                          "and DB_PASSWORD=hunter2hunter2 api_key: \"q8w7e6r5t4y3\"")
    assert "b3BlbnNzaC1rZXkt" not in text and "abcdefghijklmnopqrstuvwxyz012345" not in text
    assert "hunter2hunter2" not in text and "q8w7e6r5t4y3" not in text
    assert "DB_PASSWORD=[redacted assigned secret]" in text and "Bearer [redacted bearer token]" in text
    assert counts == {"private key": 1, "bearer token": 1, "assigned secret": 2}


@pytest.mark.parametrize("text", [
    "The token bucket refills every second; reset your password in the settings page.",
    "sk-learn is a library; the secret is to test first.",
    "commit 3f2a9c1d on branch AKIA-docs",
    "私のパスワードは秘密です",
])
def test_ordinary_text_is_kept(text):
    assert redact(text) == (text, {})
