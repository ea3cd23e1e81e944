"""The update check as the tools see it: `check_update` (the check itself:
cpersona/updates/; the notice of status answers: `ServiceBase.with_update_notice`)."""

from __future__ import annotations

from typing import Any

from cpersona.policy import validate
from cpersona.service.base import ServiceBase


class UpdateService(ServiceBase):
    """Mixed into `Engine` (which sets `updates`)."""

    def check_update(self, refresh: Any = False, apply: Any = False) -> dict[str, Any]:
        """Report the update check of this process: {enabled, distribution, running_version,
        state: newer|yanked|current|unpublished|unknown, latest, notice, source: cache|index,
        checked_at, checking, last_error?, install?}. `refresh` starts a fresh fetch and
        `apply` installs the offered release of this distribution into the running
        environment; both run in the background (call again for the outcome).

        Raises InvalidArgument when refresh/apply are not booleans."""
        return self.updates.report(validate.boolean("refresh", refresh), validate.boolean("apply", apply))
