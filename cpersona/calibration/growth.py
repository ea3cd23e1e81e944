"""Calibration that follows the corpus: which agents the server (re)calibrates by itself.

A threshold measured on an agent's first dozen rows describes those rows, not the store
they grow into: on the public sets, a server started on an empty file calibrated at a
load-dependent moment while the corpus was being stored (JSQuAD's threshold from its first
paragraphs far above the one from the whole store) and kept that number for good, and
answerable questions came back empty (measured:
benchmarks/rounds/2026-12-01-round-07-calibration.md). So, with
CPERSONA_CALIBRATE_ON_MODEL_CHANGE (default on):

* the server calibrates an agent (and the global threshold, over all agents) by itself only
  once it holds `CPERSONA_CALIBRATE_MIN_ROWS` embedded rows (default 200, the default
  sample of one calibration) — before that the heuristic gate answers;
* it calibrates the agent again each time its embedded rows reach `GROWTH` × the count its
  calibration was measured on (a doubling: at most log₂ of the store's growth
  recalibrations, each in the background);
* an agent calibrated with arguments of the caller's own (another method, percentile,
  z-factor or sample size) keeps that calibration: it is not measured again with the
  defaults (`calibrated_rows` holds only calibrations made with the default request).

The watch runs on the calibration thread after the startup guard, every `WATCH_S` seconds
(one GROUP BY over the stored vectors).
"""

from __future__ import annotations

from collections.abc import Mapping

#: A calibration is measured again once the rows it describes have grown this many times.
GROWTH = 2.0
#: Seconds between two looks at the stored row counts.
WATCH_S = 15.0
#: The key of the global threshold in the row-count tables (agent ids are never empty).
GLOBAL = ""


def due(counts: Mapping[str, int], calibrated_rows: Mapping[str, int], calibrated: set[str],
        minimum: int) -> list[str]:
    """The keys (agent ids, `GLOBAL` for the global threshold) to calibrate now.

    counts: embedded rows per key now; calibrated_rows: rows each default-request calibration
    was measured on; calibrated: keys holding a calibration of any kind (a key calibrated
    without an entry in `calibrated_rows` was calibrated with the caller's own arguments and
    is left alone); minimum: CPERSONA_CALIBRATE_MIN_ROWS. `GLOBAL` comes first: the agents'
    calibrations fall back to it."""
    out = []
    for key, rows in counts.items():
        if rows < minimum:
            continue
        if key in calibrated_rows:
            if rows >= GROWTH * calibrated_rows[key]:
                out.append(key)
        elif key not in calibrated:
            out.append(key)
    return sorted(out, key=lambda k: (k != GLOBAL, k))
