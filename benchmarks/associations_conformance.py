"""Declared associations, ours against the original CPersona 2.6.14's: the same calls over MCP
stdio to both servers, each on a fresh database (embedding mode none), and a comparison of
what they answer — the entities and their hops, aliases and mentioning refs of every
`traverse`, its relations and bounds, and what each `declare_associations` / `store(associations)`
registered, recorded and dropped. Entities are compared by name and relations by the names of
their ends (the two servers may number them alike, but need not).

The calls (`CALLS`) cover declaring (aliases, a Japanese one, an alias claimed twice, relations
to records, malformed items, an anchor of another agent), the store rider, project and channel
scopes, traverse's hops and limits and its scope filters (project_id, channel, source_id),
retract, the pause, and a memory's deletion taking its declarations. Differences we made on
purpose are listed in `DELIBERATE` (docs/differences.md says why); anything else is reported as
a difference, and the exit status is 1.

Usage::

    python benchmarks/associations_conformance.py --original /path/to/cpersona-2.6.14/bin/cpersona
        [--out benchmarks/results/associations-conformance.json] [--keep]

The original is not a dependency: install `cpersona==2.6.14` in a throwaway venv. The
test tests/mcp/test_associations_conformance.py runs this when CPERSONA_ORIGINAL_2614 names it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp_server import McpServer, ToolError

AGENT = "kai"
AIKO = {"type": "User", "id": "discord:aiko", "name": "Aiko"}
#: (label, tool, arguments): run in this order on both servers.
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("store 1", "store", {"agent_id": AGENT, "content": "Aiko leads the payments team.", "id": "m1", "source": AIKO}),
    ("store 2", "store", {"agent_id": AGENT, "content": "The checkout service calls Stripe.", "id": "m2",
                          "project_id": "ops"}),
    ("store 3", "store", {"agent_id": AGENT, "content": "Ren took over the payments team in March.", "id": "m3"}),
    ("store 4", "store", {"agent_id": AGENT, "content": "On #ops we page Ren for checkout incidents.", "id": "m4",
                          "channel": "#ops"}),
    ("store other agent", "store", {"agent_id": "mika", "content": "Mika's own note.", "id": "x1"}),
    ("declare", "declare_associations", {"agent_id": AGENT, "anchor_ref": "mem:1", "associations": {
        "entities": [{"name": "Aiko", "aliases": ["Aiko Tanaka"]},
                     {"name": "payments team", "aliases": ["決済チーム", "Payments"]}],
        "relations": [{"subject": "Aiko", "predicate": "Leads", "object": "payments team"},
                      {"subject": "payments team", "predicate": "owns", "object": "checkout service"}]}}),
    ("store rider", "store", {"agent_id": AGENT, "content": "Ren owns the checkout runbook.", "id": "m5",
                              "associations": {"entities": [{"name": "Ren"}, {"name": "checkout runbook"}],
                                               "relations": [{"subject": "Ren", "predicate": "owns",
                                                              "object": "checkout runbook"}]}}),
    ("declare supersedes", "declare_associations", {"agent_id": AGENT, "anchor_ref": "mem:3", "associations": {
        "entities": [{"name": "REN"}, {"name": "決済チーム"}],
        "relations": [{"subject": "Ren", "predicate": "leads", "object": "決済チーム"},
                      {"subject": "mem:3", "predicate": "supersedes", "object": "mem:1"},
                      {"subject": "Aiko", "predicate": "member of", "object": "platform team"}]}}),
    ("declare project", "declare_associations", {"agent_id": AGENT, "anchor_ref": "mem:2", "project_id": "ops",
                                                 "associations": {
        "entities": [{"name": "Stripe"}],
        "relations": [{"subject": "checkout service", "predicate": "calls", "object": "Stripe"}]}}),
    ("declare channel", "declare_associations", {"agent_id": AGENT, "anchor_ref": "mem:4", "channel": "#ops",
                                                 "associations": {
        "entities": [{"name": "on-call rota", "aliases": ["rota"]}],
        "relations": [{"subject": "Ren", "predicate": "is on", "object": "on-call rota"}]}}),
    ("declare malformed", "declare_associations", {"agent_id": AGENT, "anchor_ref": "mem:5", "associations": {
        "entities": [{"name": ""}, {"name": "   "}, {"name": "x" * 257},
                     {"name": "Yuki", "aliases": ["Aiko Tanaka", "", "Yuki-san"]}],
        "relations": [{"subject": "Ren", "predicate": " ", "object": "Aiko"},
                      {"subject": "mem:999", "predicate": "cites", "object": "Aiko"},
                      {"subject": "Ren", "predicate": "cites", "object": "mem:6"},
                      {"subject": "ep:1", "predicate": "cites", "object": "Ren"},
                      {"subject": "Ren", "predicate": "mentors", "object": "Yuki"}]}}),
    ("declare wrong types", "declare_associations", {"agent_id": AGENT, "associations": {
        "entities": ["Aiko", {"name": "Ren", "aliases": "not a list"}, {"aliases": ["x"]}],
        "relations": ["Ren leads", {"subject": "Ren", "predicate": "mentors", "object": 42}]}}),
    ("declare foreign anchor", "declare_associations", {"agent_id": AGENT, "anchor_ref": "mem:6",
                                                        "associations": {"entities": [{"name": "Mika"}]}}),
    ("traverse Aiko", "traverse", {"agent_id": AGENT, "entity": "Aiko"}),
    ("traverse alias 0 hops", "traverse", {"agent_id": AGENT, "entity": "aiko  TANAKA", "max_hops": 0}),
    ("traverse Japanese alias", "traverse", {"agent_id": AGENT, "entity": "決済チーム", "max_hops": 2}),
    ("traverse 5 hops", "traverse", {"agent_id": AGENT, "entity": "Aiko", "max_hops": 5}),
    ("traverse limit 2", "traverse", {"agent_id": AGENT, "entity": "payments team", "max_hops": 3, "limit": 2}),
    ("traverse limit 1", "traverse", {"agent_id": AGENT, "entity": "Ren", "limit": 1}),
    ("traverse project ops", "traverse", {"agent_id": AGENT, "entity": "checkout service", "max_hops": 2,
                                          "project_id": "ops"}),
    ("traverse global only", "traverse", {"agent_id": AGENT, "entity": "checkout service", "max_hops": 2,
                                          "project_id": ""}),
    ("traverse channel", "traverse", {"agent_id": AGENT, "entity": "Ren", "channel": "#ops"}),
    ("traverse without channel", "traverse", {"agent_id": AGENT, "entity": "rota"}),
    ("traverse other channel", "traverse", {"agent_id": AGENT, "entity": "rota", "channel": "#web"}),
    ("traverse source", "traverse", {"agent_id": AGENT, "entity": "payments team", "source_id": "discord:aiko"}),
    ("traverse other agent", "traverse", {"agent_id": "mika", "entity": "Aiko"}),
    ("traverse unknown", "traverse", {"agent_id": AGENT, "entity": "nobody"}),
    ("retract", "declare_associations", {"agent_id": AGENT, "retract": {
        "relations": ["$relation Aiko leads payments team", 999999],
        "mentions": [{"entity": "$entity Ren", "ref": "mem:6"}, {"entity": "$entity Aiko", "ref": "mem:9"},
                     {"ref": "mem:1"}, {"entity": "$entity Aiko", "ref": "note 1"}]}}),
    ("retract wrong types", "declare_associations", {"agent_id": AGENT, "retract": {
        "relations": [True, "$relation Aiko member of platform team"], "mentions": ["mem:1"]}}),
    ("traverse after retract", "traverse", {"agent_id": AGENT, "entity": "payments team", "max_hops": 2}),
    ("pause", "pause_persistence", {"ttl_seconds": 60}),
    ("declare paused", "declare_associations", {"agent_id": AGENT, "associations": {"entities": [{"name": "Ghost"}]}}),
    ("resume", "resume_persistence", {}),
    ("traverse paused entity", "traverse", {"agent_id": AGENT, "entity": "Ghost"}),
    ("delete memory 3", "delete_memory", {"memory_id": 3}),
    ("traverse after delete", "traverse", {"agent_id": AGENT, "entity": "Ren", "max_hops": 2}),
]

#: Differences made on purpose (docs/differences.md): (call label or "*", field) → why.
DELIBERATE: dict[tuple[str, str], str] = {
    ("*", "dropped.reason"): "our reasons name the bound (\"… of at most 256 characters\")",
    ("declare wrong types", "tool_error"): "items of the wrong JSON type: the original's nested schema refuses "
                                           "the whole call; ours drops each item and records the rest",
    ("retract wrong types", "tool_error"): "ids of the wrong JSON type in retract: the original's schema refuses "
                                           "the call; ours drops each item and retracts the rest",
}


# ------------------------------------------------------------------ the runs
def _resolve(value: Any, names: dict[str, Any]) -> Any:
    """`$entity <name>` / `$relation <subject> <predicate> <object>` placeholders → that
    server's ids (learned from its earlier answers)."""
    if isinstance(value, str) and value.startswith("$"):
        return names.get(value, 0)
    if isinstance(value, dict):
        return {k: _resolve(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, names) for v in value]
    return value


def _learn(answer: dict, names: dict[str, Any]) -> None:
    for entity in answer.get("entities", []):
        if isinstance(entity, dict) and "name" in entity and "id" in entity:
            names.setdefault(f"$entity {entity['name']}", entity["id"])
    by_id = {e["id"]: e["name"] for e in answer.get("entities", []) if isinstance(e, dict) and "hops" in e}
    for r in answer.get("relations", []):
        if isinstance(r, dict) and r.get("subject") in by_id and r.get("object") in by_id:
            names[f"$relation {by_id[r['subject']]} {r['predicate']} {by_id[r['object']]}"] = r["id"]


async def run(command: list[str], folder: Path) -> dict[str, Any]:
    """Every call of CALLS on the server `command`, on a fresh database in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {"CPERSONA_EMBEDDING_MODE": "none", "EMBEDDING_MODE": "none", "CPERSONA_UPDATE_CHECK": "false",
           "CPERSONA_EXPORT_DIR": str(folder), "HOME": str(folder), "PATH": os.environ.get("PATH", "")}
    names: dict[str, Any] = {}
    answers: dict[str, Any] = {}
    async with McpServer(folder / "memory.db", "none", env=env, command=command) as server:
        for label, tool, arguments in CALLS:
            try:
                answer, _ = await server.call(tool, _resolve(arguments, names))
            except ToolError as err:  # the call refused as a whole (its schema): recorded, not fatal
                answer = {"tool_error": str(err)}
            _learn(answer, names)
            answers[label] = answer
    return answers


# ------------------------------------------------------------- the comparison
def _traverse_view(answer: dict) -> dict[str, Any]:
    if "tool_error" in answer:
        return {"tool_error": True}
    names = {e["id"]: e["name"] for e in answer.get("entities", [])}
    return {
        "entities": [(e["name"], e["hops"], sorted(e.get("aliases", [])), e.get("mentions", []),
                      e.get("mentions_omitted", 0)) for e in answer.get("entities", [])],
        "relations": [(names.get(r["subject"]), r["predicate"], names.get(r["object"]), r["declared_by"],
                       r.get("anchor_ref", "")) for r in answer.get("relations", [])],
        "bounds": answer.get("bounds", {}).get("omitted", []), "entities_omitted": answer.get("entities_omitted", 0),
        "reason": answer.get("reason"),
    }


def _declare_view(answer: dict) -> dict[str, Any]:
    if "tool_error" in answer:
        return {"tool_error": True}
    report = answer.get("associations", answer)
    return {
        "result": answer.get("result"), "persisted": answer.get("persisted", True),
        "entities": [(e["name"], e["created"]) for e in report.get("entities", [])],
        "mentions": report.get("mentions", 0), "relations": len(report.get("relations", [])),
        "dropped": sorted(d["item"] for d in report.get("dropped", [])),
        "dropped.reason": sorted((d["item"], d["reason"]) for d in report.get("dropped", [])),
        "retracted": answer.get("retracted"),
    }


VIEWS = {"traverse": _traverse_view, "declare_associations": _declare_view, "store": _declare_view}


def compare(ours: dict[str, Any], theirs: dict[str, Any]) -> list[dict[str, Any]]:
    """Every field of every call where the two differ: {call, field, ours, original, deliberate?}."""
    found = []
    for label, tool, _ in CALLS:
        view = VIEWS.get(tool)
        if view is None:
            continue
        a, b = view(ours[label]), view(theirs[label])
        if ("tool_error" in a) != ("tool_error" in b):
            a, b = {"tool_error": "tool_error" in a}, {"tool_error": "tool_error" in b}
        for field in a:
            if a[field] != b[field]:
                why = DELIBERATE.get((label, field)) or DELIBERATE.get(("*", field))
                found.append({"call": label, "field": field, "ours": a[field], "original": b[field],
                              **({"deliberate": why} if why else {})})
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--original", default=os.environ.get("CPERSONA_ORIGINAL_2614", ""),
                   help="the original 2.6.14's console script (default: $CPERSONA_ORIGINAL_2614)")
    p.add_argument("--out", type=Path, help="write the answers and the differences as JSON here")
    p.add_argument("--keep", action="store_true", help="keep the two databases (their folder is printed)")
    args = p.parse_args(argv)
    if not args.original:
        p.error("--original (or CPERSONA_ORIGINAL_2614) is required")
    folder = Path(tempfile.mkdtemp(prefix="cpersona-conformance-"))
    ours = asyncio.run(run([sys.executable, "-m", "cpersona"], folder / "ours"))
    theirs = asyncio.run(run([args.original], folder / "original"))
    differences = compare(ours, theirs)
    unexpected = [d for d in differences if "deliberate" not in d]
    report = {"calls": len(CALLS), "differences": differences, "unexpected": len(unexpected),
              "ours": ours, "original": theirs}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    for d in differences:
        print(json.dumps(d, ensure_ascii=False))
    print(f"{len(CALLS)} calls, {len(differences)} differences, {len(unexpected)} not deliberate"
          + (f"; databases kept in {folder}" if args.keep else ""))
    if not args.keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
