"""Shared helpers of the cpersona benchmarks (`retrieval.py`, `latency.py`).

* data: locating the evaluation sets (`<repo>/../shared/data` by default), loading the
  normalised JSONL format, deterministic query sub-sampling;
* metrics (`metrics.py`, re-exported here): recall@k, MRR@10, NDCG@10, aggregation, percentiles;
* MCP (`mcp_server.py`, re-exported here): `McpServer`, the real server over stdio;
* plain-text tables (`tables.py`, re-exported here): `fmt`, `ms`, `print_table`;
* the benchmark loops shared by both scripts: store a corpus, wait for the embeddings,
  recall every query and score it;
* output: plain-text tables, progress lines on stderr, JSON results.

Nothing here imports cpersona's core: the benchmarks measure the server exactly as an MCP
client sees it (JSON over stdio, one sequential call at a time).
"""

from __future__ import annotations

import collections
import json
import os
import platform
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

import pg
from mcp_server import McpServer as McpServer
from mcp_server import ToolError as ToolError
from mcp_server import proc_cpu_s as proc_cpu_s
from mcp_server import proc_memory_mb as proc_memory_mb
from mcp_server import server_children as server_children
from metrics import METRIC_KEYS as METRIC_KEYS
from metrics import aggregate as aggregate
from metrics import latency_summary as latency_summary
from metrics import percentile as percentile
from metrics import score_ranking as score_ranking
from tables import fmt as fmt
from tables import ms as ms
from tables import print_table as print_table

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "benchmarks" / "results"

#: Agent id of the readiness probe; never used by a data set, never scored.
PROBE_AGENT = "__bench_probe__"

#: Reference lexical floor (`fts5_baseline.py`, from ../shared/data/README.md, measured on
#: a 2-core machine with an in-memory DB and ALL queries of each set).
BASELINE_FLOOR = {
    "locomo": {"recall@10": 0.580, "ndcg@10": 0.449, "p50_ms": 2.0, "p95_ms": 6.2, "queries": 1536},
    "longmemeval_oracle": {"recall@10": 0.581, "ndcg@10": 0.465, "p50_ms": 18, "p95_ms": 43, "queries": 470},
    "jsquad": {"recall@10": 0.952, "ndcg@10": 0.908, "p50_ms": 1.5, "p95_ms": 5.9, "queries": 8862},
    "scale-10000": {"recall@10": 0.875, "ndcg@10": 0.855, "p50_ms": 1.9, "p95_ms": 4.7, "queries": 1000},
    "scale-100000": {"recall@10": 0.846, "ndcg@10": 0.789, "p50_ms": 25, "p95_ms": 70, "queries": 1000},
}


# --------------------------------------------------------------------------- data
@dataclass
class Dataset:
    """One evaluation set in the normalised format (see ../shared/data/README.md)."""

    name: str
    path: Path
    memories: list[dict]
    queries: list[dict]


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def resolve_dataset(name: str, data_root: Path) -> Path:
    """Folder of data set `name`.

    * `locomo`, `jsquad`, `longmemeval_oracle` (any folder of `data_root`);
    * `scale-<dir>` → `data_root/scale/<dir>` (e.g. `scale-sample-1000`), or `<dir>` itself
      when that is an existing folder (e.g. `scale-/tmp/scale10k`);
    * any folder path holding memories.jsonl + queries.jsonl.
    """
    candidates = [data_root / name]
    if name.startswith("scale-"):
        rest = name[len("scale-"):]
        candidates = [data_root / "scale" / rest, Path(rest)]
    candidates.append(Path(name))
    for folder in candidates:
        if (folder / "memories.jsonl").is_file() and (folder / "queries.jsonl").is_file():
            return folder.resolve()
    tried = ", ".join(str(c) for c in candidates)
    raise SystemExit(f"data set {name!r} not found (looked for memories.jsonl + queries.jsonl in: {tried})")


def load_dataset(folder: Path, name: str | None = None) -> Dataset:
    return Dataset(
        name=name or folder.name,
        path=folder,
        memories=read_jsonl(folder / "memories.jsonl"),
        queries=read_jsonl(folder / "queries.jsonl"),
    )


def generate_scale(data_root: Path, n: int, out: Path) -> float:
    """Write the SCALE corpus of `n` rows to `out` (`<data>/scale/make_scale.py`); returns seconds taken."""
    started = time.perf_counter()
    subprocess.run([sys.executable, str(data_root / "scale" / "make_scale.py"), str(n), "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def select_evenly(items: Sequence, n: int | None) -> list:
    """`n` items spread evenly over `items` (indices floor(i * len / n)); all when n is
    None/0 or ≥ len. Deterministic: the same input always gives the same subset."""
    if not n or n >= len(items):
        return list(items)
    return [items[i * len(items) // n] for i in range(n)]


def category_of(query: dict) -> str:
    """Per-category bucket: `category`, else `split` (JSQuAD has no categories), else '-'."""
    return str(query.get("category") or query.get("split") or "-")


# ----------------------------------------------------------------------- progress
class Progress:
    """Plain progress lines on stderr, at most one every `every` seconds (and at the end)."""

    def __init__(self, label: str, total: int, every: float = 5.0) -> None:
        self.label, self.total, self.every = label, total, every
        self.done = 0
        self.started = self.last = time.perf_counter()

    def update(self, n: int = 1, note: str = "") -> None:
        self.done += n
        now = time.perf_counter()
        if now - self.last >= self.every or self.done >= self.total:
            self.last = now
            rate = self.done / max(now - self.started, 1e-9)
            eta = (self.total - self.done) / rate if rate > 0 else float("inf")
            tail = f"  {note}" if note else ""
            print(f"  [{self.label}] {self.done}/{self.total}  {rate:.0f}/s  eta {eta:.0f}s{tail}",
                  file=sys.stderr, flush=True)


def parse_server_env(pairs: Sequence[str] | None) -> dict[str, str]:
    """`--server-env KEY=VALUE` options → dict (extra variables for the server process,
    e.g. OPENBLAS_NUM_THREADS=1; the MCP client passes only a minimal environment)."""
    env = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--server-env expects KEY=VALUE, got {pair!r}")
        env[key] = value
    return env


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -------------------------------------------------------------- benchmark loops
def ref_rowid(ref: str) -> int | None:
    """Row id of a memory ref "mem:<id>"; None for episodes ("ep:…") or anything else."""
    kind, _, num = str(ref).partition(":")
    return int(num) if kind == "mem" and num.isdigit() else None


@dataclass
class StoreReport:
    """What storing a corpus did: row id → data-set ids, result counts, timings."""

    rows: dict[int, list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    counts: collections.Counter = field(default_factory=collections.Counter)
    problems: list[dict] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0

    def as_json(self) -> dict[str, Any]:
        n = len(self.ms)
        return {
            "calls": n,
            "results": dict(self.counts),
            "distinct_rows": len(self.rows),
            "wall_s": round(self.wall_s, 2),
            "stores_per_s": round(n / self.wall_s, 1) if self.wall_s else None,
            "per_call": latency_summary(self.ms),
            "problems": self.problems[:20],
        }


async def store_corpus(server: McpServer, memories: list[dict], label: str = "store") -> StoreReport:
    """Store every memory under its own agent_id, sequentially; message.id = data-set id,
    message.timestamp = created_at when the set has one."""
    report = StoreReport()
    progress = Progress(label, len(memories))
    started = time.perf_counter()
    for mem in memories:
        message: dict[str, Any] = {"content": mem["text"], "id": mem["id"]}
        if mem.get("created_at"):
            message["timestamp"] = mem["created_at"]
        payload, ms = await server.call("store", {"agent_id": mem["agent_id"], "message": message})
        report.ms.append(ms)
        result = payload.get("result", "error" if not payload.get("ok") else "?")
        report.counts[result] += 1
        if payload.get("embedded"):
            report.counts["embedded_at_store"] += 1
        row = payload.get("id")
        if isinstance(row, int):
            report.rows[row].append(mem["id"])
        if result != "stored":
            report.problems.append({"id": mem["id"], "result": result,
                                    "reason": payload.get("reason") or payload.get("error"), "row": row})
        progress.update()
    report.wall_s = time.perf_counter() - started
    return report


def stored_rows(db_path: Path) -> dict[int, list[str]]:
    """Row id → [data-set id] of a database stored earlier by `store_corpus` (message.id =
    data-set id), read from the file (read-only)."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return {i: [m] for i, m in conn.execute("SELECT id, msg_id FROM memories")}
    finally:
        conn.close()


async def wait_embedding_ready(server: McpServer, timeout_s: float = 180.0) -> float:
    """Poll a recall on the probe agent until the response carries no `advisory` (the
    backend answered). Returns the seconds waited. Raises TimeoutError, or RuntimeError
    when the advisory reports a fault."""
    started = time.perf_counter()
    import anyio

    while True:
        payload, _ = await server.call("recall", {"agent_id": PROBE_AGENT, "query": "readiness probe", "limit": 1})
        advisory = payload.get("advisory")
        if not advisory:
            return time.perf_counter() - started
        if advisory.get("severity") == "fault":
            raise RuntimeError(f"embedding backend fault: {advisory.get('reason')} ({advisory.get('evidence')})")
        if time.perf_counter() - started > timeout_s:
            raise TimeoutError(f"embedding backend not ready after {timeout_s:.0f}s: {advisory.get('reason')}")
        await anyio.sleep(0.25)


async def wait_calibration_settled(server: McpServer, agent_ids: str | list[str], timeout_s: float = 900.0) -> float:
    """Poll `get_recall_precision` until the server's own calibration has caught up: not
    running, and no agent of `agent_ids` due for one (`follows_corpus.due`: it holds
    CPERSONA_CALIBRATE_MIN_ROWS embedded rows and no calibration, or twice the rows its
    calibration measured — the server's watch calibrates it within ~15 s). A store just
    filled, or a database copied without its calibration file, is calibrated in a
    background thread, and recalls timed or scored meanwhile would see a moving gate and share
    the CPU with it. Returns the seconds waited; raises TimeoutError."""
    import anyio

    agents = [agent_ids] if isinstance(agent_ids, str) else list(agent_ids)
    started = time.perf_counter()
    while True:
        busy = []
        for agent in agents:
            payload, _ = await server.call("get_recall_precision", {"agent_id": agent})
            cal = payload.get("calibration") or {}
            if (cal.get("startup") or {}).get("running") or (cal.get("follows_corpus") or {}).get("due"):
                busy.append(agent)
        if not busy:
            return time.perf_counter() - started
        if time.perf_counter() - started > timeout_s:
            raise TimeoutError(f"calibration not settled after {timeout_s:.0f}s (agents {busy[:5]})")
        await anyio.sleep(1.0)


def count_unembedded(db_path: Path | str) -> tuple[int, int]:
    """(rows with embedding IS NULL, all rows) in `memories`, via a read-only connection
    (`db_path` may be a postgresql:// URL: benchmarks/pg.py)."""
    if pg.is_url(db_path):
        return pg.count_unembedded(str(db_path))
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    try:
        null = conn.execute("SELECT COUNT(*) FROM memories WHERE embedding IS NULL").fetchone()[0]
        total = conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]
        return null, total
    finally:
        conn.close()


def row_ids(db_path: Path | str) -> list[tuple[int, str]]:
    """(row id, msg_id) of every memory (`db_path` a file or a postgresql:// URL)."""
    if pg.is_url(db_path):
        import psycopg

        with psycopg.connect(str(db_path), autocommit=True) as conn:
            return [tuple(r) for r in conn.execute("SELECT id, msg_id FROM memories ORDER BY id")]
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute("SELECT id, msg_id FROM memories ORDER BY id").fetchall()
    finally:
        conn.close()


async def wait_all_embedded(db_path: Path | str, timeout_s: float = 600.0) -> tuple[float, int]:
    """Wait until no memory row lacks a vector (the server's backfill). Returns (seconds
    waited, rows still NULL at the end — 0 unless the timeout expired)."""
    import anyio

    started = time.perf_counter()
    null, total = count_unembedded(db_path)
    first = null
    last_print = started
    while null and time.perf_counter() - started < timeout_s:
        await anyio.sleep(0.5)
        null, total = count_unembedded(db_path)
        if time.perf_counter() - last_print > 5:
            last_print = time.perf_counter()
            log(f"  [backfill] {first - null}/{first} embedded, {null} of {total} rows still without a vector")
    return time.perf_counter() - started, null


@dataclass
class RecallRun:
    per_query: list[dict]
    ms: list[float]
    advisories: int
    errors: int
    unmapped_rows: int


async def recall_queries(server: McpServer, queries: list[dict], limit: int, rows: dict[int, list[str]],
                         label: str = "recall") -> RecallRun:
    """Recall every query with its own agent_id (sequential) and score it. The ranking is
    the response REVERSED (the server lists worst → best)."""
    per_query, ms_all = [], []
    advisories = errors = unmapped = 0
    progress = Progress(label, len(queries))
    for q in queries:
        payload, ms = await server.call("recall", {"agent_id": q["agent_id"], "query": q["query"], "limit": limit})
        ms_all.append(ms)
        if payload.get("ok") is False:
            errors += 1
        if payload.get("advisory"):
            advisories += 1
        messages = payload.get("messages") or []
        ranking = []
        for msg in reversed(messages):
            ids = rows.get(ref_rowid(msg.get("ref", "")))
            if ids is None:
                unmapped += 1
            ranking.append(ids or [])
        scores = score_ranking(ranking, q)
        per_query.append({"id": q["id"], "category": category_of(q), "rows": len(messages), "ms": round(ms, 2),
                          **scores})
        progress.update()
    return RecallRun(per_query, ms_all, advisories, errors, unmapped)


#: Seconds to let the server finish what its first recalls started in the background: the
#: FTS indexes held in memory are built once the file has been quiet for 0.5 s (~2 s of CPU
#: at 10k rows: cpersona/storage/resident_fts.py); until then recall asks FTS5.
WARM_SETTLE_S = 8.0


async def warm_up(server: McpServer, agent_id: str, n: int = 3) -> None:
    """A few unmeasured recalls (first-use costs: index load, statement cache, the word
    postings' build), then WARM_SETTLE_S of quiet."""
    for i in range(n):
        await server.call("recall", {"agent_id": agent_id, "query": f"warm-up query number {i}", "limit": 10})
    await anyio.sleep(WARM_SETTLE_S)


# ------------------------------------------------------------------------- output
def loadavg() -> list[float] | None:
    """1/5/15-minute load average (other work on the machine inflates latencies)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def busy_machine_note(load_at_start: list[float] | None) -> str:
    """A warning line when other processes kept the CPUs busy before the run, else ''."""
    cpus = os.cpu_count() or 1
    if load_at_start and load_at_start[0] > 0.5 * cpus:
        return (f"NOTE: load average was {load_at_start[0]} on {cpus} CPUs before the run: other processes "
                "were busy, latencies are inflated")
    return ""


def machine_info() -> dict[str, Any]:
    """Python / CPU / platform / SQLite, load average now, and the git commit of the repo
    (call it BEFORE spawning the server: that is the code being measured)."""
    info: dict[str, Any] = {"python": platform.python_version(), "cpu_count": os.cpu_count(),
                            "platform": platform.platform(), "loadavg_start": loadavg()}
    try:
        info["sqlite"] = sqlite3.sqlite_version
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "cpersona"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        info["git_commit"] = commit + ("+dirty(cpersona/)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def run_in_workdir(prefix: str, keep: bool, run, args) -> Any:
    """`anyio.run(run, args, workdir)` in a fresh temp folder, removed afterwards unless
    `keep` (then its path is logged)."""
    import shutil
    import tempfile

    import anyio

    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        return anyio.run(run, args, workdir)
    finally:
        if keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def run_benchmark(prefix: str, args, run, report, out: Path) -> dict:
    """The shared `main` of a benchmark: `run` in a fresh temp folder (run_in_workdir, kept
    with args.keep_db), then the wall time and machine (load average before / after) are
    added, `report(result)` prints the table and the JSON goes to `out`."""
    started = time.perf_counter()
    machine = machine_info()
    result = run_in_workdir(prefix, args.keep_db, run, args)
    result["total_wall_s"] = round(time.perf_counter() - started, 1)
    result["machine"] = {**machine, "loadavg_end": loadavg()}
    report(result)
    write_json(out, result)
    return result
