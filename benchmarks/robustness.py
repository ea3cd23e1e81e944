"""Crash safety, isolation and refusals of cpersona, measured over MCP stdio.

1. **crash** — `--rounds` rounds on ONE file: each round starts `--writers` server processes
   (`python -m cpersona`), sends each `--parallel` store calls at once (pipelined JSON-RPC),
   waits until a random number of them is acknowledged (plus 0–20 ms), then kills every
   server with SIGKILL (no shutdown, no checkpoint) while the rest are in flight. The next
   round starts on the crashed file. Counted: acknowledged stores missing from the file
   afterwards (**lost**, must be 0), and at the end SQLite's `integrity_check` and the FTS5
   `integrity-check`.
2. **isolation** — one server holds a memory and an episode in every combination of 3 agents
   × 3 projects × 3 channels; every reader scope (4 agents × 5 projects × 4 channels for
   recall, 4 × 5 for list_memories / list_episodes) is queried and every returned row checked
   against the visibility rule, every visible row checked to be returned: **checks**, **leaks**
   (a row outside the scope) and **misses**.
3. **refusals** — calls with a broken argument, and frames that are not readable requests;
   each must change nothing in the file (**changed**, must be 0).

Writes JSON (default `benchmarks/results/robustness.json`).

Usage::

    python benchmarks/robustness.py [--rounds 40] [--writers 3] [--parallel 16] [--out PATH] [--keep]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpersona.devtools.isolation import visible

import common

AGENTS, PROJECTS, CHANNELS = ("A", "B", ""), ("", "P", "Q"), ("", "c1", "c2")
TOKEN = "zebra-token-7"  # an identifier: an exact match, never cut by the quality gate


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=40, help="kill -9 rounds (default 40)")
    p.add_argument("--writers", type=int, default=3, help="server processes per round (default 3)")
    p.add_argument("--parallel", type=int, default=16, help="store calls in flight per server (default 16)")
    p.add_argument("--seed", type=int, default=7, help="random seed of the kill moments")
    p.add_argument("--out", type=Path, default=common.RESULTS / "robustness.json", help="JSON output")
    p.add_argument("--keep", action="store_true", help="keep the temp folder (DBs, server logs)")
    return p.parse_args(argv)


class Wire:
    """A server process driven over raw JSON-RPC lines (pipelined calls, SIGKILL)."""

    def __init__(self, db_path: Path, errlog) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CPERSONA_", "EMBEDDING_"))}
        env.update(CPERSONA_DB_PATH=str(db_path), CPERSONA_EMBEDDING_MODE="none")
        self.proc = subprocess.Popen([sys.executable, "-m", "cpersona"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=errlog, env=env, cwd=db_path.parent)
        self.next_id = 0

    def frame(self, raw: bytes) -> None:
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict) -> int:
        self.next_id += 1
        self.frame(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode())
        return self.next_id

    def reply(self) -> dict | None:
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def call(self, method: str, params: dict) -> dict:
        rid = self.request(method, params)
        while (answer := self.reply()) is not None:
            if answer.get("id") == rid:
                return answer
        raise RuntimeError(f"server closed stdout before answering {method}")

    def handshake(self) -> None:
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "robustness", "version": "0"}})
        self.frame(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def tool(self, name: str, arguments: dict) -> dict:
        answer = self.call("tools/call", {"name": name, "arguments": arguments})
        if "error" in answer:
            return {"protocol_error": answer["error"]}
        return json.loads(answer["result"]["content"][0]["text"])


# ------------------------------------------------------------------ crash
def _crash_round(path: Path, rnd: int, args: argparse.Namespace, rng: random.Random, errlog) -> dict[str, int]:
    wires = [Wire(path, errlog) for _ in range(args.writers)]
    for wire in wires:
        wire.handshake()
    acked: list[str] = []
    sent = 0
    lock = threading.Lock()

    def collect(wire: Wire, texts: dict[int, str]) -> None:
        while (answer := wire.reply()) is not None:
            text = texts.get(answer.get("id"))
            if text is None or "result" not in answer:
                continue
            body = json.loads(answer["result"]["content"][0]["text"])
            if body.get("result") == "stored":
                with lock:
                    acked.append(text)

    readers = []
    for w, wire in enumerate(wires):
        texts = {}
        for c in range(args.parallel):
            text = f"round {rnd} writer {w} call {c}: the harbour crane log"
            texts[wire.request("tools/call", {"name": "store", "arguments": {
                "agent_id": "crash", "message": {"content": text}}})] = text
            sent += 1
        reader = threading.Thread(target=collect, args=(wire, texts), daemon=True)
        reader.start()
        readers.append(reader)
    target, deadline = rng.randint(1, sent - 1), time.monotonic() + 10
    while len(acked) < target and time.monotonic() < deadline:  # kill mid-stream: some acked, some in flight
        time.sleep(0.001)
    time.sleep(rng.uniform(0.0, 0.02))
    for wire in wires:
        wire.proc.send_signal(signal.SIGKILL)
    for wire in wires:
        wire.proc.wait(30)
    for reader in readers:
        reader.join(30)
    present = _present(path, [f"round {rnd} writer {w} call {c}: the harbour crane log"
                              for w in range(args.writers) for c in range(args.parallel)])
    with lock:
        lost = [t for t in acked if t not in present]
        return {"sent": sent, "acknowledged": len(acked), "lost": len(lost), "present": len(present)}


def _present(path: Path, texts: list[str]) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        marks = ",".join("?" * len(texts))
        return {r[0] for r in conn.execute(f"SELECT content FROM memories WHERE content IN ({marks})", texts)}
    finally:
        conn.close()


def _integrity(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(path)
    try:
        out = {"integrity_check": conn.execute("PRAGMA integrity_check").fetchone()[0]}
        try:
            conn.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)")
            out["fts_integrity"] = "ok"
        except sqlite3.Error as err:
            out["fts_integrity"] = str(err)
        return out
    finally:
        conn.close()


def run_crash(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    path = workdir / "crash.db"
    rng = random.Random(args.seed)
    totals = {"sent": 0, "acknowledged": 0, "lost": 0, "present": 0}
    started = time.perf_counter()
    with (workdir / "crash.stderr.log").open("ab") as errlog:
        for rnd in range(args.rounds):
            for key, n in _crash_round(path, rnd, args, rng, errlog).items():
                totals[key] += n
            common.log(f"crash round {rnd + 1}/{args.rounds}: {totals}")
        wire = Wire(path, errlog)  # a clean start on the crashed file, then a clean exit
        wire.handshake()
        final = wire.tool("store", {"agent_id": "crash", "message": {"content": "after the last crash"}})
        wire.proc.stdin.close()
        wire.proc.wait(60)
    return {"rounds": args.rounds, "writers": args.writers, "parallel_calls": args.parallel, **totals,
            "restart_store": final.get("result"), **_integrity(path),
            "seconds": round(time.perf_counter() - started, 1)}


# -------------------------------------------------------------- isolation
def _label(combo: tuple[str, str, str]) -> str:
    return "/".join(part or "~" for part in combo)


def _checked(returned: set[str], expected: set[str], ours: set[str]) -> tuple[int, int, int]:
    """(checks, leaks, misses): every returned row and every expected row is one check; a
    leak is one of our rows returned outside the scope, a miss a visible row not returned."""
    return len(returned) + len(expected), len((returned & ours) - expected), len(expected - returned)


def _memory(combo) -> str:
    return f"{TOKEN} memory {_label(combo)}"


def _episode(combo) -> str:
    return f"{TOKEN} episode {_label(combo)}"


def _reader_scopes():
    """Recall scopes (agent, project, channel), then list scopes (agent, project)."""
    agents, projects = ("A", "B", "", "nobody"), (None, "", "P", "Q", "R")
    return itertools.product(agents, projects, ("", "c1", "c2", "c9")), itertools.product(agents, projects)


def run_isolation(workdir: Path) -> dict[str, Any]:
    combos = list(itertools.product(AGENTS, PROJECTS, CHANNELS))
    memories, episodes = {_memory(c) for c in combos}, {_episode(c) for c in combos}
    totals = [0, 0, 0, 0]  # calls, checks, leaks, misses

    def count(returned: set[str], expected: set[str], ours: set[str]) -> None:
        for i, n in enumerate((1, *_checked(returned, expected, ours))):
            totals[i] += n

    with (workdir / "iso.stderr.log").open("ab") as errlog:
        wire = Wire(workdir / "iso.db", errlog)
        wire.handshake()
        for a, p, c in combos:
            wire.tool("store", {"agent_id": a, "message": {"content": _memory((a, p, c))}, "project_id": p,
                                "channel": c})
            wire.tool("archive_episode", {"agent_id": a, "summary": _episode((a, p, c)), "project_id": p,
                                          "channel": c})
        recall_scopes, list_scopes = _reader_scopes()
        for agent, project, channel in recall_scopes:
            arguments = {"agent_id": agent, "query": TOKEN, "limit": 100, "channel": channel}
            arguments |= {"project_id": project} if project is not None else {}
            rows = {m["content"] for m in wire.tool("recall", arguments).get("messages", [])}
            seen = [c for c in combos if visible(c, agent, project, channel)]
            count({r for r in rows if not r.startswith("[")}, {_memory(c) for c in seen}, memories)
            count({r.removeprefix("[Episode] ") for r in rows if r.startswith("[Episode] ")},
                  {_episode(c) for c in seen}, episodes)
        for agent, project in list_scopes:
            seen = [c for c in combos if visible(c, agent, project, "", agent_all=agent == "")]
            arguments = {"agent_id": agent} | ({"project_id": project} if project is not None else {})
            listed = wire.tool("list_memories", arguments | {"limit": 500}).get("memories", [])
            count({m["content"] for m in listed}, {_memory(c) for c in seen}, memories)
            listed = wire.tool("list_episodes", arguments | {"limit": 200}).get("episodes", [])
            count({e["summary"] for e in listed}, {_episode(c) for c in seen}, episodes)
        wire.proc.stdin.close()
        wire.proc.wait(60)
    calls, checks, leaks, misses = totals
    return {"calls": calls, "checks": checks, "leaks": leaks, "misses": misses}


# --------------------------------------------------------------- refusals
REFUSED_CALLS = [
    ("store", {"agent_id": "kai", "message": {"content": ""}}),
    ("store", {"agent_id": "kai", "message": {"content": "x", "timestamp": "yesterday"}}),
    ("store", {"agent_id": "kai", "message": {"content": "x" * 20_000}}),
    ("store", {"agent_id": "kai", "message": {"content": "x", "metadata": {"k": "v" * 9000}}}),
    ("archive_episode", {"agent_id": "kai", "summary": "   "}),
    ("archive_episode", {"agent_id": "kai", "summary": "s", "history": [{"timestamp": "not a time"}]}),
    ("update_memory", {"memory_id": 10**12, "content": "new text"}),
    ("delete_memory", {"memory_id": 1, "agent_id": "someone-else"}),
    ("update_memory", {"memory_id": 1, "content": "changed by another agent", "agent_id": "someone-else"}),
    ("recall", {"agent_id": "kai", "query": "x", "limit": 0}),
    ("delete_agent_data", {"agent_id": ""}),
    ("set_recall_precision", {"agent_id": "kai", "precision": "extreme"}),
]
REFUSED_FRAMES = [
    b'{"jsonrpc":"2.0","id":901,"method":"tools/call","params":{"name":"store","arguments":'
    b'{"agent_id":"kai","message":{"content":"caf\xe9"}}}}',
    b'{"jsonrpc":"2.0","id":902,"method":"tools/call","params":{"name":"store","arguments":'
    b'{"agent_id":"kai","message":{"content":"half \\ud83d"}}}}',
    b'{"jsonrpc":"2.0","id":903,"method":"tools/call","params":{"name":"store","arguments":'
    b'{"agent_id":"kai","message":{"content":' + b"[" * 300 + b"]" * 300 + b"}}}}",
]


def _fingerprint(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        digest = hashlib.sha256()
        for table in ("memories", "episodes", "profiles", "pending_memory_tasks"):
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY rowid"):
                digest.update(repr(row).encode())
        return digest.hexdigest()
    finally:
        conn.close()


def run_refusals(workdir: Path) -> dict[str, Any]:
    path = workdir / "refusals.db"
    with (workdir / "refusals.stderr.log").open("ab") as errlog:
        wire = Wire(path, errlog)
        wire.handshake()
        wire.tool("store", {"agent_id": "kai", "message": {"content": "the one row that must not change"}})
        changed = unanswered = 0
        for name, arguments in REFUSED_CALLS:
            before = _fingerprint(path)
            wire.call("tools/call", {"name": name, "arguments": arguments})
            changed += _fingerprint(path) != before
        for raw in REFUSED_FRAMES:
            before = _fingerprint(path)
            wire.frame(raw)
            ping = wire.request("ping", {})
            answers = 0  # replies that came before the ping's: the frame's answer, if any
            while (reply := wire.reply()) is not None and reply.get("id") != ping:
                answers += 1
            changed += _fingerprint(path) != before
            unanswered += answers == 0
        wire.proc.stdin.close()
        wire.proc.wait(60)
    return {"refused_calls": len(REFUSED_CALLS), "refused_frames": len(REFUSED_FRAMES), "changed": changed,
            "unanswered_frames": unanswered}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    load = common.loadavg()

    def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
        return {"crash": run_crash(args, workdir), "isolation": run_isolation(workdir),
                "refusals": run_refusals(workdir)}

    async def run_async(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
        return run(args, workdir)

    results = common.run_in_workdir("cpersona-robust-", args.keep, run_async, args)
    crash, iso, ref = results["crash"], results["isolation"], results["refusals"]
    common.print_table(
        ["measure", "value"],
        [("kill -9 rounds × writers × parallel calls", f"{crash['rounds']} × {crash['writers']} × "
                                                      f"{crash['parallel_calls']}"),
         ("stores sent / acknowledged", f"{crash['sent']} / {crash['acknowledged']}"),
         ("acknowledged stores lost", crash["lost"]),
         ("integrity_check / FTS integrity", f"{crash['integrity_check']} / {crash['fts_integrity']}"),
         ("isolation checks / leaks / misses", f"{iso['checks']} / {iso['leaks']} / {iso['misses']}"),
         ("refused calls + frames / changed the file", f"{ref['refused_calls']} + {ref['refused_frames']} / "
                                                        f"{ref['changed']}"),
         ("unreadable frames left unanswered", ref["unanswered_frames"])])
    note = common.busy_machine_note(load)
    if note:
        print(note)
    common.write_json(args.out, {"machine": common.machine_info(), "load_before": load,
                                 "load_after": common.loadavg(), **results})
    ok = crash["lost"] == 0 and iso["leaks"] == 0 and ref["changed"] == 0 and ref["unanswered_frames"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
