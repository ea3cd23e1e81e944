"""How much of an agent's context cpersona's answers cost, measured over MCP stdio.

Spawns the real server against a fresh SQLite file, stores a public data set (LoCoMo by
default) and measures, exactly as the client receives them:

* **tools list** — characters of the `tools/list` answer (every tool as serialised on the
  wire: compact JSON) and the token estimate characters / 4 that every conversation pays;
* **recall rows** — UTF-8 bytes per returned message (its JSON object), of which content,
  and the share that is metadata (ref, timestamp, source, match_reason …), over the data
  set's queries (`--max-queries`, evenly spaced);
* **listings** — bytes and estimated tokens (bytes / 3: ASCII text runs ~4 bytes per token
  and CJK ~3, so this over-estimates) of `list_memories` at its default limit and at 500,
  with the rows returned and whether a cursor continues the listing.

Usage::

    python benchmarks/response_size.py [--dataset locomo] [--embedding none|local]
        [--max-queries 300] [--out PATH] [--keep-db]

With `--embedding local` the run waits for the bundled model and for every row's vector
before recalling (match_reason then carries a cosine). The JSON result goes to
`benchmarks/results/response-size-<dataset>-<embedding>.json`.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="locomo")
    p.add_argument("--embedding", choices=("none", "local"), default="none")
    p.add_argument("--limit", type=int, default=10, help="recall limit (default 10)")
    p.add_argument("--max-queries", type=int, default=300, help="queries, evenly spaced (0 = all; default 300)")
    p.add_argument("--data", type=Path, default=common.DEFAULT_DATA)
    p.add_argument("--out", type=Path)
    p.add_argument("--keep-db", action="store_true")
    return p.parse_args(argv)


def _bytes(obj: object) -> int:
    """UTF-8 size of `obj` serialised the way the server serialises results."""
    return len(json.dumps(obj, ensure_ascii=False).encode("utf-8"))


def row_sizes(messages: list[dict]) -> list[tuple[int, int]]:
    """(bytes of the message object, bytes of its content) per message."""
    return [(_bytes(m), len(m.get("content", "").encode("utf-8"))) for m in messages]


async def tools_list_size(server: common.McpServer) -> dict:
    tools = (await server._session.list_tools()).tools
    chars = sum(len(json.dumps(t.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False,
                               separators=(",", ":"))) for t in tools)
    return {"tools": len(tools), "chars": chars, "tokens_est": round(chars / 4)}


async def listing_size(server: common.McpServer, agent: str, limit: int | None) -> dict:
    args: dict = {"agent_id": agent}
    if limit is not None:
        args["limit"] = limit
    payload, _ = await server.call("list_memories", args)
    size = _bytes(payload)
    return {"limit": limit or "default", "rows": payload.get("count"), "bytes": size, "tokens_est": round(size / 3),
            "next_cursor": payload.get("next_cursor") is not None}


async def run(args: argparse.Namespace, workdir: Path) -> dict:
    folder = common.resolve_dataset(args.dataset, args.data)
    data = common.load_dataset(folder, args.dataset)
    queries = common.select_evenly(data.queries, args.max_queries or None)
    db = workdir / "bench.db"
    result: dict = {"benchmark": "response_size", "dataset": args.dataset, "embedding": args.embedding,
                    "limit": args.limit, "queries": len(queries)}
    async with common.McpServer(db, args.embedding, errlog=workdir / "server.stderr.log") as server:
        result["tools_list"] = await tools_list_size(server)
        if args.embedding != "none":
            await common.wait_embedding_ready(server)
        await common.store_corpus(server, data.memories)
        if args.embedding != "none":
            await common.wait_all_embedded(db)
        sizes: list[tuple[int, int]] = []
        responses: list[int] = []
        for q in queries:
            payload, _ = await server.call("recall", {"agent_id": q["agent_id"], "query": q["query"],
                                                      "limit": args.limit})
            sizes.extend(row_sizes(payload.get("messages") or []))
            responses.append(_bytes(payload))
        per_agent = collections.Counter(m["agent_id"] for m in data.memories)
        biggest = per_agent.most_common(1)[0][0]
        result["listings"] = [await listing_size(server, biggest, None), await listing_size(server, biggest, 500)]
    total = [s for s, _ in sizes]
    content = [c for _, c in sizes]
    result["recall_rows"] = {
        "rows": len(sizes),
        "bytes_per_row": round(statistics.fmean(total), 1) if total else None,
        "content_bytes_per_row": round(statistics.fmean(content), 1) if content else None,
        "metadata_share": round(1 - sum(content) / sum(total), 3) if total else None,
        "bytes_per_response": round(statistics.fmean(responses), 1) if responses else None,
    }
    return result


def report(result: dict) -> None:
    t, r = result["tools_list"], result["recall_rows"]
    print(f"\n== response size: {result['dataset']}  embedding={result['embedding']}  limit={result['limit']}  "
          f"{result['queries']} queries")
    common.print_table(("what", "value"), [
        ("tools", t["tools"]), ("tools list chars", t["chars"]), ("tools list tokens (chars/4)", t["tokens_est"]),
        ("recall rows measured", r["rows"]), ("bytes per recall row", r["bytes_per_row"]),
        ("  of which content", r["content_bytes_per_row"]), ("metadata share", r["metadata_share"]),
        ("bytes per recall response", r["bytes_per_response"]),
    ])
    print()
    common.print_table(("list_memories limit", "rows", "bytes", "tokens (bytes/3)", "cursor"),
                       [(x["limit"], x["rows"], x["bytes"], x["tokens_est"], x["next_cursor"])
                        for x in result["listings"]])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out or common.RESULTS / f"response-size-{args.dataset}-{args.embedding}.json"
    common.run_benchmark("cpersona-size-", args, run, report, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
