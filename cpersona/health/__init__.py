"""Health of a store: integrity checks with repairs (`check_health`), per-agent content
inspections (`deep_check`).

The checks are data — one `Check` row each in `registry.py`, grouped by concern:
`content.py` (text of memories and profiles), `vectors.py` (stored vectors, the embedding
backend, the resident index), `schema.py` (the file, FTS5, schema objects), `fields.py`
(JSON, timestamps, sources), `operations.py` (queue, calibration, operating context,
project ids). `runner.py` runs them (the fix sequence), `deep.py` the deep checks,
`model.py` holds what they share. All SQL is in `storage/` (`repairs.py`, `integrity.py`,
`inventory.py`); the service layer builds the `HealthEnv` for the server or for
`cpersona checkup`.
"""

from cpersona.health.deep import DEEP_CHECKS, deep_check
from cpersona.health.model import HealthEnv
from cpersona.health.registry import CHECKS, NAMES
from cpersona.health.runner import check_health

__all__ = ["CHECKS", "DEEP_CHECKS", "NAMES", "HealthEnv", "check_health", "deep_check"]
