"""The statistics of calibration (calibration/stats.py): the separation search between the
null and the positive cosine distributions, and sessions split on gaps in time."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest
from cpersona.calibration import stats


def test_separation_search_finds_the_gap_and_honours_min_keep():
    null = np.linspace(0.0, 0.3, 200)
    pos = np.linspace(0.5, 0.9, 50)
    sep = stats.separation_search(null, pos, beta=1.0, floor=0.05)
    assert 0.3 <= sep.threshold <= 0.5 and sep.youden_j == pytest.approx(1.0)
    overlapping = np.linspace(0.2, 0.8, 100)
    strict = stats.separation_search(null, overlapping, beta=4.0, floor=0.05)
    capped = stats.separation_search(null, overlapping, beta=4.0, floor=0.05, min_keep=0.9)
    assert capped.tpr >= 0.9 and capped.threshold <= strict.threshold
    assert stats.separation_search(np.array([0.4]), np.array([0.4]), 1.0, 0.05).threshold == 0.4  # hi <= lo


def test_sessions_split_on_gaps_longer_than_the_window():
    t0 = datetime(2026, 1, 1)
    stamps = [t0, t0 + timedelta(minutes=10), t0 + timedelta(hours=5), t0 + timedelta(days=1)]
    assert stats.sessions(stamps, 1800) == 3 and stats.sessions([], 1800) == 0
