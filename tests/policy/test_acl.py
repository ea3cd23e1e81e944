"""The ACL file (strict loading, ${VAR} tokens, effective permissions) and the tool
classification (every row, at none / read / read-write)."""

from __future__ import annotations

import json
import os

import pytest
from cpersona.errors import ConfigError
from cpersona.policy.acl import ANY_AGENT, LOCAL, AccessList, Client, Permission, load_acl
from cpersona.policy.acl_rules import RULES, CallFacts, decide
from cpersona.policy.tokens import MIN_LENGTH, token_problem

from acl_table import ROWS

GOOD = "good-token-0123456789abcdefghijklmnopqrstuv"
OTHER = "other-token-0123456789abcdefghijklmnopqrstu"


def write_acl(tmp_path, doc, name="acl.json") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    os.chmod(path, 0o600)
    return str(path)


def entry(client_id="alice", token=GOOD, grants=None, **extra):
    out = {"client_id": client_id, "grants": {"alice": "read-write"} if grants is None else grants, **extra}
    if token is not None:
        out["token"] = token
    return out


# ---------------------------------------------------------------- strict loading
DEFECTS = [
    ("not json", "{clients: []", "not valid JSON"),
    ("top level list", [], "exactly"),
    ("extra top-level key", {"clients": [entry()], "x": 1}, "exactly"),
    ("empty clients", {"clients": []}, "non-empty list"),
    ("entry not object", {"clients": ["alice"]}, "clients[0]: must be an object"),
    ("unknown key", {"clients": [entry(role="admin")]}, "unknown key(s) role"),
    ("empty client_id", {"clients": [entry(client_id="")]}, "client_id must be a non-empty string"),
    ("duplicate client_id", {"clients": [entry(), entry(token=OTHER)]}, "repeats client_id 'alice'"),
    ("grants not object", {"clients": [entry(grants=["alice"])]}, "grants must be an object"),
    ("empty grant key", {"clients": [entry(grants={"": "read"})]}, "empty agent id"),
    ("bad permission", {"clients": [entry(grants={"alice": "write"})]}, "expected none, read or read-write"),
    ("missing token", {"clients": [entry(token=None)]}, "token must be a non-empty string"),
    ("token not string", {"clients": [entry(token=12345)]}, "token must be a non-empty string"),
    ("unset variable", {"clients": [entry(token="${CPERSONA_TEST_UNSET_VAR}")]}, "unset or empty"),
    ("partial reference", {"clients": [entry(token="x${CPERSONA_TEST_TOKEN}")]}, "only as the whole string"),
    ("non-ascii token", {"clients": [entry(token="ü" * 40)]}, "non-ASCII"),
    ("short token", {"clients": [entry(token="short")]}, f"at least {MIN_LENGTH}"),
    ("duplicate token", {"clients": [entry(), entry(client_id="bob")]}, "same token"),
    ("local with token", {"clients": [entry(client_id=LOCAL, token=GOOD)]}, "takes no token"),
]


@pytest.mark.parametrize(("label", "doc", "needle"), DEFECTS, ids=[d[0] for d in DEFECTS])
def test_every_defect_refuses_with_a_message_naming_the_entry(tmp_path, label, doc, needle):
    with pytest.raises(ConfigError) as err:
        load_acl(write_acl(tmp_path, doc), {"CPERSONA_TEST_TOKEN": GOOD})
    assert needle in str(err.value)
    assert GOOD not in str(err.value), "a token never appears in a message"


def test_unreadable_file_refuses(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_acl(str(tmp_path / "missing.json"))


def test_variable_tokens_resolve_and_authenticate(tmp_path):
    path = write_acl(tmp_path, {"clients": [entry(token="${ALICE_TOK}"), entry("bob", "${BOB_TOK}", {"*": "read"}),
                                            entry(LOCAL, None, {"*": "read-write"})]})
    acl = load_acl(path, {"ALICE_TOK": GOOD, "BOB_TOK": OTHER})
    assert acl.authenticate(GOOD.encode()) == "alice"
    assert acl.authenticate(OTHER.encode()) == "bob"
    assert acl.authenticate(b"nope") is None
    assert acl.authenticate(GOOD.encode() + b"x") is None
    assert acl.client(LOCAL) is not None and acl.client(LOCAL).token is None


def test_variable_token_is_not_trimmed(tmp_path):
    path = write_acl(tmp_path, {"clients": [entry(token="${ALICE_TOK}")]})
    with pytest.raises(ConfigError, match="whitespace"):
        load_acl(path, {"ALICE_TOK": GOOD + "\n"})


def test_group_readable_file_only_warns(tmp_path, caplog):
    path = write_acl(tmp_path, {"clients": [entry()]})
    os.chmod(path, 0o644)
    assert len(load_acl(path)) == 1
    assert "readable by group or others" in caplog.text


# ------------------------------------------------------------ effective permissions
def test_exact_grant_wins_even_when_lower_than_star():
    client = Client("c", b"t", {"*": Permission.READ_WRITE, "secret": Permission.NONE, "ro": Permission.READ})
    assert client.permission("anyone") is Permission.READ_WRITE
    assert client.permission("secret") is Permission.NONE
    assert client.permission("ro") is Permission.READ


def test_sweep_needs_a_star_grant_and_takes_the_minimum():
    assert Client("c", b"t", {"a": Permission.READ_WRITE}).permission(ANY_AGENT) is Permission.NONE
    assert Client("c", b"t", {"*": Permission.READ_WRITE, "a": Permission.READ}).permission(ANY_AGENT) is Permission.READ
    assert Client("c", b"t", {"*": Permission.READ_WRITE}).permission(ANY_AGENT) is Permission.READ_WRITE


def test_token_rules():
    assert token_problem(GOOD) is None
    assert "whitespace" in token_problem(GOOD + " ")
    assert "distinct" in token_problem("ab" * 20)
    assert "letters, digits" in token_problem("a:b" + GOOD)


# ----------------------------------------------------------- the classification
LEVELS = [Permission.NONE, Permission.READ, Permission.READ_WRITE]


def acl_at(level: Permission) -> AccessList:
    """Client "c" with `level` on agent "team" and on "*", and read-write on its own agent "own"."""
    return AccessList([Client("c", b"t", {"team": level, "*": level, "own": Permission.READ_WRITE})])


@pytest.mark.parametrize("level", LEVELS, ids=[lv.label for lv in LEVELS])
@pytest.mark.parametrize(("tool", "args", "needed"), ROWS, ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)])
def test_every_classification_row_at_every_grant(tool, args, needed, level):
    decision = decide(acl_at(level), "c", tool, args, CallFacts(export_confined=True))
    assert decision.allowed == (needed is None or level >= needed)
    if not decision.allowed:
        body = decision.denial()
        assert body["ok"] is False and body["error"] == "permission_denied" and body["tool"] == tool
        assert body["client_id"] == "c" and body["required"] == needed.label and body["detail"]


def test_the_table_covers_every_classified_tool():
    assert {row[0] for row in ROWS} == set(RULES)


def test_merge_copy_needs_read_on_source_and_write_on_target():
    acl = AccessList([Client("c", b"t", {"src": Permission.READ, "dst": Permission.READ_WRITE})])
    copy = {"source_agent_id": "src", "target_agent_id": "dst"}
    assert decide(acl, "c", "merge_memories", copy, CallFacts()).allowed
    moved = decide(acl, "c", "merge_memories", {**copy, "mode": "move"}, CallFacts())
    assert not moved.allowed and moved.demand.agent == "src"
    backwards = decide(acl, "c", "merge_memories", {"source_agent_id": "dst", "target_agent_id": "src"}, CallFacts())
    assert not backwards.allowed and backwards.demand.agent == "src"


def test_export_without_an_export_dir_escalates_to_star():
    acl = AccessList([Client("c", b"t", {"team": Permission.READ_WRITE})])
    args = {"agent_id": "team", "output_path": "/tmp/x.jsonl"}
    assert decide(acl, "c", "export_memories", args, CallFacts(export_confined=True)).allowed
    unconfined = decide(acl, "c", "export_memories", args, CallFacts(export_confined=False))
    assert not unconfined.allowed and unconfined.demand.agent == "*"


@pytest.mark.parametrize("value", [None, "", 7, ["team"], {"a": 1}])
def test_agent_argument_that_is_not_a_non_empty_string_demands_star(value):
    acl = AccessList([Client("c", b"t", {"team": Permission.READ_WRITE})])
    args = {} if value is None else {"agent_id": value}
    decision = decide(acl, "c", "list_memories", args, CallFacts())
    assert not decision.allowed
    body = decision.denial()
    assert body["agent_id"] == "*" and "agent_id" in body["detail"] and "'*' grant" in body["detail"]


def test_unclassified_tool_unknown_client_and_no_client_are_denied():
    acl = acl_at(Permission.READ_WRITE)
    assert "no access classification" in decide(acl, "c", "brand_new_tool", {}, CallFacts()).denial()["detail"]
    assert not decide(acl, "ghost", "recall", {"agent_id": "team"}, CallFacts()).allowed
    nobody = decide(acl, None, "persistence_status", {}, CallFacts())
    assert not nobody.allowed and nobody.denial()["client_id"] == ""
