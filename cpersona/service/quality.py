"""The quality-gate tools: calibrate_threshold, set_recall_precision, get_recall_precision
(the measurements themselves live in cpersona/calibration/)."""

from __future__ import annotations

from dataclasses import dataclass

from cpersona.calibration.precision import global_beta, label_for, parse_request, resolve_precision
from cpersona.calibration.runner import Calibration
from cpersona.config import Settings
from cpersona.policy import validate
from cpersona.policy.pause import Pause
from cpersona.service.outcomes import Report
from cpersona.service.paused import skipped_body
from cpersona.storage import Database
from cpersona.storage.scope import Scope


@dataclass(frozen=True, eq=False)
class QualityService:
    """The calibration tools over the engine's calibration state."""

    settings: Settings
    db: Database
    pause: Pause
    calibration: Calibration

    def calibrate_threshold(self, agent_id: object, sample_size: object = 0, z_factor: object = 0,
                            method: object = "", percentile: object = 0) -> Report:
        """Derive the agent's (or, with agent_id "", the global) vector threshold and fused
        gate from the corpus (calibration/runner.py). Arguments are validated first
        (InvalidArgument); paused: the skipped body."""
        req = parse_request(self.settings, agent_id, sample_size, z_factor, method, percentile)
        paused = skipped_body(self.pause, "calibrate_threshold", scope="per_agent" if req.agent_id else "global",
                              agent_id=req.agent_id, method=req.method, z_factor=req.z_factor,
                              percentile=req.percentile)
        if paused is not None:
            return paused
        return self.calibration.calibrate(req.agent_id, req.sample_size, req.z_factor, req.method, req.percentile)

    def set_recall_precision(self, agent_id: object, precision: object = "", beta: object = 0) -> Report:
        """Move the agent's gate operating point: strict β 2.0, balanced 1.0, lenient 0.5, or
        beta > 0; "" and 0 clear the override. Recalibrates the agent at once; a failed
        recalibration rolls the override back."""
        agent = validate.required_agent(agent_id, "whose precision to set")
        value, label = resolve_precision(self.settings, precision, beta)
        shown = value if value is not None else global_beta(self.settings)
        body = {"ok": True, "agent_id": agent, "precision": label, "beta": shown, "cleared": value is None}
        if (paused := skipped_body(self.pause, "set_recall_precision", **body)) is not None:
            return paused
        previous = self.calibration.set_beta(agent, value)
        result = self.calibration.calibrate(agent)
        if not result.get("ok"):
            self.calibration.restore_beta(agent, value, previous)
            return {**body, "ok": False, "error": f"recalibration failed, precision unchanged: {result.get('error')}"
                    "; meanwhile recall(deep=true) widens a single search"}
        out: Report = {**body, "fused_gate": result.get("fused_gate"),
                               "calibrate": {"ok": True, "scope": result["scope"],
                                             "new_threshold": result["new_threshold"],
                                             "sidecar_persisted": result.get("sidecar_persisted")}}
        if result.get("fused_gate_error"):
            out["calibrate"]["fused_gate_error"] = result["fused_gate_error"]
        return out

    def get_recall_precision(self, agent_id: object) -> Report:
        """The agent's precision plus its calibration state. Never writes."""
        agent = validate.required_agent(agent_id, "")
        self.calibration.pick_up()  # what another server on this store saved, before anything is read
        beta = self.calibration.beta(agent)
        gb = global_beta(self.settings)
        out = {"ok": True, "agent_id": agent, "precision": label_for(beta), "beta": beta,
               "overridden": agent in self.calibration.betas, "global_precision": label_for(gb), "global_beta": gb,
               "calibration": self.calibration.status(agent)}
        if agent:
            with self.db.read() as s:
                if not s.search.pool_size(Scope(agent)):  # a misspelt agent id looks like a real one otherwise
                    out["note"] = f"agent {agent!r} has no memories or episodes yet"
        return out
