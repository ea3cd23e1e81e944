"""The operating-context boundary of the six project_id tools (spec tools.md §0.5).

`gated(...)` resolves "@auto" and checks the registry before the core call, then adds
`resolved_project_id` / `operating_context_warning` to the response. A refusal (writes in
`reject` mode only) returns `{ok: false, error, operating_context_revision}` plus the tool's
own failure keys (`messages: []`, `episode_id: null`, …; store also gets `reason`).
"""

from __future__ import annotations

from typing import Any, Callable

from cpersona.core.engine import Engine
from cpersona.mcp.results import call


def gated(
    engine: Engine,
    tool: str,
    agent_id: str,
    project_id: str | None,
    write: bool,
    run: Callable[[str | None], dict[str, Any]],
    failure: dict[str, Any],
) -> str:
    """Run `run(resolved_project_id)` behind the gate and serialise the result like `call`."""

    def go() -> dict[str, Any]:
        gate = engine.project_gate(agent_id, project_id, write)
        if gate.refusal is not None:
            body = gate.refused(failure)
            if "result" in failure:
                body["reason"] = gate.refusal
            return body
        out = run(gate.project_id)
        return {**out, **gate.extras} if gate.extras else out

    return call(tool, go, failure)
