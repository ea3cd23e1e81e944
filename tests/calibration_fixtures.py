"""Fixtures of the calibration tests (test_calibration.py, test_sidecar.py; a plugin of
tests/conftest.py): engines on one file, made and closed by the test, and a calibrated corpus."""

from __future__ import annotations

import pytest
from cpersona.calibration import sidecar

from quality_helpers import make, session_corpus, store_rows


@pytest.fixture
def cal_db(tmp_path):
    """The file every engine of a calibration test opens (`backends.py` owns the name `db`)."""
    return tmp_path / "cal.db"


@pytest.fixture
def engines():
    made = []
    yield made
    for eng in reversed(made):
        eng.close()


@pytest.fixture
def factory(cal_db, engines):
    def build(**overrides):
        overrides.setdefault("recall_mode", "rsf")  # a fused gate is calibrated on rsf / rrf, not cc (test_cc_*)
        eng = make(cal_db, **overrides)
        engines.append(eng)
        return eng
    return build


@pytest.fixture
def calibrated(factory):
    """Agent 'a' with a 5-session corpus, calibrated."""
    eng = factory()
    store_rows(eng, session_corpus())
    res = eng.calibrate_threshold("a")
    assert res["ok"] is True, res
    return eng, res


def sidecar_path(eng):
    return sidecar.path_for(eng.settings.db_file)
