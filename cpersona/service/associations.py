"""Declared associations — declare_associations and the `associations` of `store`.

The server extracts nothing and infers nothing: the agent declares entities (with aliases)
and subject–predicate–object relations, the server records them (service/declaring.py has
the rules) and walks them (service/graph.py). A malformed item is reported in `dropped` and
skipped, never a reason to refuse the rest of the call — nor to lose the memory a `store`
carried it on. `retract` is the only way a declaration leaves, besides the deletion of the
entity or record it names. While persistence is paused nothing is written (`result:
"skipped"`). The operating context's project rules apply as to every write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cpersona.errors import InvalidArgument, StorageUnavailable
from cpersona.policy import validate
from cpersona.policy.pause import Pause
from cpersona.service.declaring import Declarer, Report, declare, empty_report, retract
from cpersona.service.paused import skipped_body
from cpersona.service.steps import Steps
from cpersona.storage import Database
from cpersona.util.time import utc_now_iso


def _object(argument: str, value: object) -> dict[str, Any] | None:
    """An object argument: None (or {}) = not given; anything but an object is refused."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidArgument(argument, f"must be an object, got {type(value).__name__}")
    return value or None


@dataclass(frozen=True, eq=False)
class AssociationService:
    """The declaring tools over the database, the pause and the shared steps."""

    db: Database
    pause: Pause
    steps: Steps

    def declare_associations(self, agent_id: object, associations: object = None, anchor_ref: object = "",
                             retract: object = None, channel: object = "", project_id: object = "") -> Report:
        """Record `associations` ({entities: [{name, aliases?}], relations: [{subject, predicate,
        object}]}) in the agent's (project_id, channel) scope, `anchor_ref` ('mem:<id>' /
        'ep:<id>' of this agent) as their evidence; then remove `retract` ({relations: [ids],
        mentions: [{entity, ref}]}) — both in one transaction. Returns {ok: true, result:
        "declared", entities: [{id, name, created}], mentions, relations: [ids], dropped:
        [{item, reason}], retracted?: {relations, mentions}}; paused: {result: "skipped",
        persisted: false, …}. Raises InvalidArgument for an argument of the wrong type."""
        return self.steps.gated("declare_associations", agent_id, project_id, True, lambda project: self._declare(
            agent_id, associations, anchor_ref, retract, channel, project))

    def _declare(self, agent_id: object, associations: object, anchor_ref: object, retracting: object,
                 channel: object, project_id: object) -> Report:
        if (paused := skipped_body(self.pause, "declare_associations")) is not None:
            return paused
        agent = validate.identifier("agent_id", agent_id)
        project = validate.identifier("project_id", project_id)
        where = validate.identifier("channel", channel)
        anchor = validate.identifier("anchor_ref", anchor_ref)
        declared, removing = _object("associations", associations), _object("retract", retracting)
        self.steps.refresh_if_changed()
        with self.db.write() as s:
            declarer = Declarer(s.associations, agent, project, where, "agent", utc_now_iso())
            report = declare(declarer, declared or {}, anchor) if declared else empty_report()
            if removing:
                report["retracted"], dropped = retract(s.associations, agent, removing)
                report["dropped"] += [d.body() for d in dropped]
        return {"ok": True, "result": "declared", **report}

    def on_stored(self, answer: Mapping[str, Any], agent_id: object, associations: object, project_id: object,
                  channel: object) -> Report:
        """`store(associations=…)`: `associations` declared against the row the store answered
        with — the new memory, or the equal one it was skipped for — in the store's scope,
        the memory as anchor. The store's answer, plus `associations` (the declaration's
        report) when there was something to declare and a row to declare it on (a paused or
        refused store has none). The memory is stored whatever the declaration holds."""
        out = dict(answer)
        row = answer.get("id")
        if associations is None or associations == {} or not isinstance(row, int) or isinstance(row, bool):
            return out
        if not isinstance(associations, dict):
            out["associations"] = {**empty_report(),
                                   "dropped": [{"item": "associations", "reason": "must be an object"}]}
            return out
        project = self.steps.operating_context.gate(agent_id, project_id, True).project_id
        try:
            with self.db.write() as s:
                declarer = Declarer(s.associations, str(agent_id), str(project or ""), str(channel or ""), "agent",
                                    utc_now_iso())
                out["associations"] = declare(declarer, associations, f"mem:{row}")
        except StorageUnavailable as err:  # the memory is stored: say so, and that nothing was declared
            out["associations"] = {**empty_report(), "error_kind": err.kind, "dropped": [
                {"item": "associations", "reason": f"nothing declared: {err}; call declare_associations with "
                                                   f"anchor_ref 'mem:{row}' to declare it"}]}
        return out
