"""The host hooks as Claude Code runs them: latency of each hook command, and how often the
block a prompt gets holds what the question needs.

Latency — for each size (1k and 10k rows of the synthetic SCALE corpus, stored for the hooks'
agent `claude-code`): each hook event is run as Claude Code runs it — a new process
`cpersona hook <Event>` with the event's JSON on stdin, timed wall to wall (interpreter start,
imports, the answer, exit) —

* warm: while a server (`python -m cpersona`, the MCP server over stdio, as a host starts it)
  runs for the database, so the hook asks it over the local endpoint;
* cold: with no server, so the hook answers in its own process, keyword only.

SessionStart and UserPromptSubmit read (each prompt a different query of the corpus);
Stop, PreCompact and SessionEnd store a new 10-turn session each run (SessionEnd also archives
its episode). p50 / p95 per event; target: UserPromptSubmit p95 ≤ 300 ms warm at 10k rows.

Recall@budget — the LoCoMo dialogues (../shared/data/locomo: every turn stored, one agent per
conversation): each question is sent as a prompt (the `context` request a UserPromptSubmit
hook makes, through the running server) for each token budget, and a prompt counts as a hit
when its block holds at least one of the question's evidence turns. Also reported: the share
of prompts with no block (the gate passed nothing) and the mean rows / tokens of a block.

Usage::

    python benchmarks/hooks.py [--sizes 1000,10000] [--runs 40] [--cold-runs 8]
        [--embedding local|http|none] [--prompts 400] [--budgets 400,800,1600]
        [--skip-latency] [--skip-locomo] [--data DIR] [--out PATH] [--keep-db]

The machine's load is recorded with the results: on a busy machine every latency is inflated.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpersona.util import local_channel
from cpersona.util.places import db_target

import common
import latency

AGENT = "claude-code"
EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact", "SessionEnd")
TURNS_PER_SESSION = 10
PROMPT_P95_TARGET_MS = 300.0
_REF = re.compile(r"\[mem:(\d+)")
_TOOK = re.compile(r", (\d+) ms\)$")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,10000", help="corpus sizes (default 1000,10000)")
    p.add_argument("--runs", type=int, default=40, help="warm runs per event (default 40)")
    p.add_argument("--cold-runs", type=int, default=8, help="cold runs per event (default 8)")
    p.add_argument("--embedding", choices=("local", "http", "none"), default="local",
                   help="the server's embedding: the bundled model (default), the fake /embed server, or none")
    p.add_argument("--prompts", type=int, default=400, help="LoCoMo questions, evenly spaced (default 400)")
    p.add_argument("--budgets", default="400,800,1600", help="prompt-block token budgets (default 400,800,1600)")
    p.add_argument("--skip-latency", action="store_true")
    p.add_argument("--skip-locomo", action="store_true")
    p.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    p.add_argument("--out", type=Path, default=common.RESULTS / "hooks.json")
    p.add_argument("--keep-db", action="store_true", help="keep the temp folder")
    args = p.parse_args(argv)
    args.size_list = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.budget_list = [int(s) for s in args.budgets.split(",") if s.strip()]
    return args


def hook_command() -> list[str]:
    """What a host runs: the `cpersona` script beside this interpreter, else `-m cpersona`."""
    script = Path(sys.executable).parent / "cpersona"
    return [str(script)] if script.exists() else [sys.executable, "-m", "cpersona"]


def write_transcript(path: Path, texts: list[str], session: str) -> None:
    """A Claude Code transcript of alternating user / assistant turns."""
    with path.open("w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            kind = "user" if i % 2 == 0 else "assistant"
            content: Any = text if kind == "user" else [{"type": "text", "text": text}]
            f.write(json.dumps({"type": kind, "uuid": f"{session}-{i}", "sessionId": session,
                                "timestamp": f"2025-03-04T10:{i % 60:02d}:00Z",
                                "message": {"role": kind, "content": content}}) + "\n")


class HookRunner:
    """Runs hook commands as Claude Code does, in one environment."""

    def __init__(self, env: dict[str, str], workdir: Path, texts: list[str], prompts: list[str]) -> None:
        self.env, self.workdir, self.texts, self.prompts = env, workdir, texts, prompts
        self.n = 0

    def data(self, event: str) -> dict[str, Any]:
        self.n += 1
        session = str(uuid.UUID(int=self.n))
        transcript = self.workdir / f"t-{self.n}.jsonl"
        start = (self.n * TURNS_PER_SESSION) % max(1, len(self.texts) - TURNS_PER_SESSION)
        turns = [f"{text} (run {self.n})" for text in self.texts[start:start + TURNS_PER_SESSION]]
        write_transcript(transcript, turns, session)  # new texts each run: every turn is stored
        data = {"session_id": session, "transcript_path": str(transcript), "cwd": str(self.workdir),
                "hook_event_name": event}
        extra = {"SessionStart": {"source": "startup"}, "PreCompact": {"trigger": "auto"},
                 "SessionEnd": {"reason": "exit"}, "Stop": {"stop_hook_active": False},
                 "UserPromptSubmit": {"prompt": self.prompts[self.n % len(self.prompts)]}}
        return {**data, **extra[event]}

    def run(self, event: str, runs: int) -> dict[str, Any]:
        """Wall ms per hook command, and `inside`: the ms its own log line reports (from its
        `main` to its answer: without the interpreter's start and the imports)."""
        times, inside, printed = [], [], 0
        for _ in range(runs):
            stdin = json.dumps(self.data(event))
            started = time.perf_counter()
            proc = subprocess.run([*hook_command(), "hook", event], input=stdin, capture_output=True, text=True,
                                  env=self.env, cwd=self.workdir, timeout=300)
            times.append((time.perf_counter() - started) * 1000)
            if proc.returncode != 0:
                raise RuntimeError(f"hook {event} exited {proc.returncode}: {proc.stderr[-500:]}")
            printed += bool(proc.stdout.strip())
            took = _TOOK.search(last_log_lines(Path(self.env["XDG_STATE_HOME"]), 1)[-1])
            if took:
                inside.append(float(took.group(1)))
        return {**common.latency_summary(times), "inside": common.latency_summary(inside), "printed": printed}


def interpreter_floor(runs: int) -> dict[str, float]:
    """Wall ms of `python -c pass` with this interpreter: what any Python hook costs at least."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append((time.perf_counter() - started) * 1000)
    return common.latency_summary(times)


def last_log_lines(state: Path, n: int) -> list[str]:
    try:
        return (state / "cpersona" / "hooks.log").read_text(encoding="utf-8").splitlines()[-n:]
    except OSError:
        return []


async def wait_endpoint(key: str, timeout_s: float = 600.0) -> float:
    """Seconds until the server's endpoint answers `status` ready."""
    import anyio

    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        answer = local_channel.ask_server(key, "status", {}, 10.0)
        if answer and answer.get("ok"):
            return time.perf_counter() - started
        await anyio.sleep(0.25)
    raise TimeoutError("the server's local endpoint never answered")


async def server_for(db: Path, args, url: str, workdir: Path, env: dict[str, str], agents: list[str]):
    """A started, embedded, calibrated server whose endpoint answers (an open context)."""
    server = common.McpServer(db, args.embedding, url, errlog=workdir / f"{db.stem}.stderr.log", env=env)
    await server.__aenter__()
    if args.embedding != "none":
        await common.wait_embedding_ready(server, 300)
        await common.wait_all_embedded(db, 1800)
        await common.wait_calibration_settled(server, agents)
    await wait_endpoint(db_target("", str(db)).key)
    return server


async def latency_size(n: int, args, url: str, workdir: Path, env: dict[str, str]) -> dict[str, Any]:
    folder = workdir / f"scale-{n}"
    common.generate_scale(args.data, n, folder)
    data = common.load_dataset(folder, f"scale-{n}")
    memories = [{**m, "agent_id": AGENT} for m in data.memories]
    db = workdir / f"hooks-{n}.db"
    latency.import_corpus(memories, workdir / f"corpus-{n}.jsonl", db)
    runner = HookRunner(env, workdir, [m["text"] for m in data.memories], [q["query"] for q in data.queries])
    row: dict[str, Any] = {"size": n, "warm": {}, "cold": {}, "python_c_pass": interpreter_floor(args.runs)}
    server = await server_for(db, args, url, workdir, env, [AGENT])
    try:
        runner.run("UserPromptSubmit", 3)  # unmeasured: the page cache, the server's first requests
        for event in EVENTS:
            row["warm"][event] = runner.run(event, args.runs)
            common.log(f"  {n} warm {event}: {row['warm'][event]}")
    finally:
        await server.__aexit__(None, None, None)
    for event in EVENTS:
        row["cold"][event] = runner.run(event, args.cold_runs)
        common.log(f"  {n} cold {event}: {row['cold'][event]}")
    row["log_tail"] = last_log_lines(Path(env["XDG_STATE_HOME"]), 3)
    return row


def block_refs(text: str, rows: dict[int, str]) -> list[str]:
    return [rows.get(int(m), "") for m in _REF.findall(text)]


async def locomo(args, url: str, workdir: Path, env: dict[str, str]) -> dict[str, Any]:
    data = common.load_dataset(common.resolve_dataset("locomo", args.data), "locomo")
    queries = common.select_evenly(data.queries, args.prompts)
    db = workdir / "locomo.db"
    latency.import_corpus(data.memories, workdir / "locomo.jsonl", db)
    rows = dict(common.row_ids(db))
    agents = sorted({m["agent_id"] for m in data.memories})
    server = await server_for(db, args, url, workdir, env, agents)
    key = db_target("", str(db)).key
    out: dict[str, Any] = {"prompts": len(queries), "budgets": {}}
    try:
        for budget in args.budget_list:
            hits = empty = shown_rows = tokens = 0
            times = []
            for q in queries:
                started = time.perf_counter()
                answer = local_channel.ask_server(key, "context", {"query": q["query"], "agent": q["agent_id"],
                                                                   "project": "", "budget": budget}, 60.0)
                times.append((time.perf_counter() - started) * 1000)
                if not answer or not answer.get("ok"):
                    raise RuntimeError(f"context request failed: {answer}")
                shown = block_refs(answer["text"], rows)
                hits += bool(set(shown) & set(q["relevant"]))
                empty += not answer["rows"]
                shown_rows += answer["rows"]
                tokens += answer["tokens"]
            k = max(1, len(queries))
            out["budgets"][budget] = {"recall_at_budget": round(hits / k, 3), "empty": round(empty / k, 3),
                                      "mean_rows": round(shown_rows / k, 2), "mean_tokens": round(tokens / k, 1),
                                      "request": common.latency_summary(times)}
            common.log(f"  locomo budget {budget}: {out['budgets'][budget]}")
    finally:
        await server.__aexit__(None, None, None)
    return out


async def run(args, workdir: Path) -> dict[str, Any]:
    from contextlib import ExitStack

    from cpersona.devtools.fake_embed import FakeEmbedServer

    run_dir = Path(tempfile.mkdtemp(prefix="cph-"))  # short: a socket path has at most ~100 bytes
    os.chmod(run_dir, 0o700)
    server_env = {"XDG_RUNTIME_DIR": str(run_dir), "XDG_STATE_HOME": str(workdir / "state")}
    os.environ.update(XDG_RUNTIME_DIR=str(run_dir))  # this process asks the endpoint too
    hooks_env = {**{k: v for k, v in os.environ.items() if not k.startswith("CPERSONA_")}, **server_env,
                 "CPERSONA_UPDATE_CHECK": "false", "CPERSONA_EMBEDDING_MODE": args.embedding}
    result: dict[str, Any] = {"benchmark": "hooks", "embedding": args.embedding, "sizes": [],
                              "targets": {"UserPromptSubmit_warm_p95_ms_at_10000": PROMPT_P95_TARGET_MS}}
    with ExitStack() as stack:
        url = stack.enter_context(FakeEmbedServer(dim=latency.DIM)).url if args.embedding == "http" else ""
        stack.callback(shutil.rmtree, run_dir, True)
        if not args.skip_latency:
            for n in args.size_list:
                env = {**hooks_env, "CPERSONA_DB_PATH": str(workdir / f"hooks-{n}.db")}
                result["sizes"].append(await latency_size(n, args, url, workdir, env))
        if not args.skip_locomo:
            result["locomo"] = await locomo(args, url, workdir, server_env)
    return result


def report(result: dict[str, Any]) -> None:
    for row in result["sizes"]:
        floor = row["python_c_pass"]
        print(f"\nhooks at {row['size']} rows: ms per hook command, wall from start to exit (inside = the hook's own "
              f"log: without interpreter start and imports; `python -c pass` here: p50 {common.ms(floor.get('p50_ms'))}"
              f", p95 {common.ms(floor.get('p95_ms'))})")
        common.print_table(["event", "warm p50", "warm p95", "inside p50", "inside p95", "cold p50", "cold p95",
                            "printed"],
                           [[e, common.ms(row["warm"][e].get("p50_ms")), common.ms(row["warm"][e].get("p95_ms")),
                             common.ms(row["warm"][e]["inside"].get("p50_ms")),
                             common.ms(row["warm"][e]["inside"].get("p95_ms")),
                             common.ms(row["cold"][e].get("p50_ms")), common.ms(row["cold"][e].get("p95_ms")),
                             f"{row['warm'][e].get('printed', 0)}/{row['warm'][e].get('n', 0)}"] for e in EVENTS])
        if row["size"] == 10_000:
            p95 = row["warm"]["UserPromptSubmit"].get("p95_ms", float("nan"))
            print(f"  target UserPromptSubmit warm p95 <= {PROMPT_P95_TARGET_MS:.0f} ms: {p95:.1f} ms "
                  f"({'met' if p95 <= PROMPT_P95_TARGET_MS else 'MISSED'})")
    if "locomo" in result:
        lo = result["locomo"]
        print(f"\nLoCoMo: {lo['prompts']} questions as prompts; a hit = the block holds an evidence turn")
        common.print_table(["budget (tokens)", "recall@budget", "empty", "rows", "tokens", "p50 ms", "p95 ms"],
                           [[str(b), v["recall_at_budget"], v["empty"], v["mean_rows"], v["mean_tokens"],
                             common.ms(v["request"].get("p50_ms")), common.ms(v["request"].get("p95_ms"))]
                            for b, v in lo["budgets"].items()])
    busy = common.busy_machine_note(result.get("machine", {}).get("loadavg_start"))
    if busy:
        print("\n" + busy)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    common.run_benchmark("cpersona-hooks-", args, run, report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
