"""Calibration that follows the corpus (calibration/growth.py): the server calibrates an agent
by itself only once it holds CPERSONA_CALIBRATE_MIN_ROWS embedded rows, measures it again
each time those rows double, and leaves a calibration made with the caller's own arguments
alone; and how a calibration gates a row (its cut placed in the question's own cosines, an agent
without one using the store's, recall mode cc without a fused gate)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from cpersona.calibration import growth, sidecar, startup

from conftest import wait_until
from quality_helpers import make, recall, session_corpus, store_rows

G = growth.GLOBAL


@pytest.mark.parametrize("counts, rows, calibrated, expected", [
    ({G: 30, "a": 30}, {}, set(), []),                                   # below the minimum: heuristic
    ({G: 60, "a": 60}, {}, set(), [G, "a"]),                             # global first
    ({G: 60, "a": 60}, {G: 40, "a": 40}, {G, "a"}, []),                  # grown 1.5×: not yet
    ({G: 80, "a": 80}, {G: 40, "a": 40}, {G, "a"}, [G, "a"]),            # doubled
    ({G: 900, "a": 900}, {G: 12, "a": 12}, {G, "a"}, [G, "a"]),          # a tiny-sample calibration is redone
    ({G: 90, "a": 90}, {G: 40}, {G, "a"}, [G]),                          # 'a' calibrated with its own arguments
    ({G: 120, "a": 60, "b": 60}, {G: 60, "a": 60}, {G, "a"}, [G, "b"]),  # a new agent reaches the minimum
])
def test_due(counts, rows, calibrated, expected):
    assert growth.due(counts, rows, calibrated, 50) == expected


def _more_rows(n: int, start: str = "2026-03-01T09:00:00+00:00") -> list[tuple[str, str]]:
    t0 = datetime.fromisoformat(start)
    return [(f"garden diary {start[:10]} {i}: tomatoes basil watering shade compost",
             (t0 + timedelta(minutes=2 * i)).isoformat()) for i in range(n)]


@pytest.fixture
def db(tmp_path):
    return tmp_path / "grow.db"


@pytest.fixture
def opened(db):
    """make(db, **settings) for a test; every engine it made is closed afterwards (close is idempotent)."""
    made = []

    def build(**overrides):
        made.append(make(db, **overrides))
        return made[-1]
    yield build
    for eng in reversed(made):
        eng.close()


def test_too_few_rows_stay_heuristic_at_start(opened):
    eng = opened()
    store_rows(eng, session_corpus()[:30])
    eng.close()
    live = opened(calibrate_on_model_change=True, calibrate_min_rows=50)
    assert wait_until(lambda: live.calibration.startup.finished_at != "", timeout=60)
    assert live.calibration.startup.action == "noop"
    status = live.get_recall_precision("a")["calibration"]
    assert status["state"] == "heuristic"
    assert status["follows_corpus"] == {"enabled": True, "rows": 30, "calibrated_rows": None, "min_rows": 50,
                                        "due": False}


def test_a_calibration_is_measured_again_once_its_rows_double(opened):
    eng = opened()
    store_rows(eng, session_corpus())  # 70 rows
    eng.close()
    live = opened(calibrate_on_model_change=True, calibrate_min_rows=50)
    assert wait_until(lambda: live.calibration.startup.finished_at != "", timeout=60)
    cal = live.calibration
    assert cal.startup.action == "initial" and cal.calibrated_rows == {G: 70, "a": 70}
    store_rows(live, _more_rows(40))  # 110 < 140: not yet
    assert startup.due(cal) == [] and not live.get_recall_precision("a")["calibration"]["follows_corpus"]["due"]
    store_rows(live, _more_rows(30, "2026-03-05T09:00:00+00:00"))  # 140 = 2 × 70
    assert startup.due(cal) == [G, "a"]
    assert live.get_recall_precision("a")["calibration"]["follows_corpus"]["due"] is True
    startup.follow(cal)  # what the watch does every growth.WATCH_S seconds
    assert cal.calibrated_rows == {G: 140, "a": 140} and cal.startup.grown == 2
    saved = json.loads(sidecar.path_for(live.settings.db_file).read_text())
    assert saved["calibrated_rows"] == {G: 140, "a": 140}
    assert startup.due(cal) == []


def test_a_calibration_with_the_callers_own_arguments_is_left_alone(opened):
    eng = opened(calibrate_min_rows=50)
    store_rows(eng, session_corpus())
    res = eng.calibrate_threshold("a", method="percentile", percentile=0.9)
    assert res["ok"] and "a" not in eng.calibration.calibrated_rows
    threshold = eng.calibration.thresholds["a"]
    store_rows(eng, _more_rows(200))
    assert "a" not in startup.due(eng.calibration)
    assert eng.calibration.thresholds["a"] == threshold
    assert eng.calibrate_threshold("a")["ok"]  # the default request: followed from now on
    assert eng.calibration.calibrated_rows["a"] == 270


def test_row_counts_must_be_counts(tmp_path):
    path = tmp_path / "x.calibration.json"
    path.write_text(json.dumps({"calibrated_rows": {"a": -3}}))
    loaded = sidecar.load(path)
    assert loaded.status == "corrupt" and "calibrated_rows" in loaded.error
    path.write_text(json.dumps({"calibrated_rows": {"a": 70, "": 90}}))
    assert sidecar.load(path).status == "ok"


def test_the_calibrated_cut_is_placed_in_the_querys_own_cosines():
    from types import SimpleNamespace

    from cpersona.retrieval.gate import query_cosine_cut

    bg = SimpleNamespace(mean=0.10, std=0.05, n=400)
    assert query_cosine_cut(0.45, 2.0, bg) == pytest.approx(0.20)  # μ_q + z·σ_q, not the stored-pair 0.45
    assert query_cosine_cut(0.45, None, bg) == 0.45                 # no z recorded: the threshold as measured
    assert query_cosine_cut(0.45, 2.0, None) == 0.45                # no vector background
    assert query_cosine_cut(0.45, 2.0, SimpleNamespace(mean=0.1, std=0.0, n=400)) == 0.45
    # a scope of a few rows cannot place it (none lies (n−1)/√n spreads above their mean): the heuristic's cut
    assert query_cosine_cut(0.45, 2.0, SimpleNamespace(mean=0.1, std=0.05, n=3)) is None
    assert query_cosine_cut(None, 2.0, bg) is None                  # uncalibrated: the heuristic


def test_a_calibration_records_its_z_and_restores_it(opened):
    eng = opened()
    store_rows(eng, session_corpus())
    res = eng.calibrate_threshold("a")
    z = eng.calibration.cosine_z["a"]
    mean, std = res["distribution"]["mean"], res["distribution"]["std"]
    assert z == pytest.approx((res["new_threshold"] - mean) / std, abs=0.01)
    assert eng.calibration.gate_for("a").cosine_z == z
    eng.close()  # a restart
    again = opened()
    assert again.calibration.gate_for("a").cosine_z == pytest.approx(z)
    assert again.calibration.gate_for("b").cosine_z is None


@pytest.mark.parametrize("minimum, status", [(50, "never_calibrated"), (100, "ok")])
def test_the_health_check_expects_a_calibration_from_the_same_row_count(opened, minimum, status):
    eng = opened(calibrate_min_rows=minimum)
    store_rows(eng, session_corpus())  # 70 embedded rows, no calibration file
    result = eng.deep_check("a", checks=["calibration_staleness"])["results"]["calibration_staleness"]
    assert result["status"] == status and result["embedded"] == 70


def test_a_sample_size_below_ten_names_the_argument_and_keeps_the_calibration(opened):
    eng = opened()
    store_rows(eng, session_corpus())
    assert eng.calibrate_threshold("a")["ok"]
    res = eng.calibrate_threshold("a", sample_size=5)
    assert res["ok"] is False and res["error"].startswith("sample_size: 5 is below the 10") and "has 70" in res["error"]
    status = eng.get_recall_precision("a")["calibration"]
    assert status["state"] == "calibrated" and "notice" not in status  # nothing changed, nothing to fix


def test_a_calibration_with_own_arguments_stays_so_after_a_restart(opened):
    eng = opened()
    store_rows(eng, session_corpus())
    assert eng.calibrate_threshold("a")["ok"] and eng.calibration.calibrated_rows["a"] == 70
    assert eng.calibrate_threshold("a", method="percentile", percentile=0.99)["ok"]
    eng.close()  # a restart
    saved = json.loads(sidecar.path_for(eng.settings.db_file).read_text())
    assert "a" not in saved["calibrated_rows"]  # the file's earlier entry is not carried back in
    again = opened()
    assert "a" not in again.calibration.calibrated_rows


def test_forgetting_an_agent_waits_for_its_running_calibration(opened):
    import threading

    eng = opened()
    store_rows(eng, session_corpus())
    assert eng.calibrate_threshold("a")["ok"]
    cal = eng.calibration
    with cal._run_lock:  # a calibration of 'a' is running
        forget = threading.Thread(target=cal.forget_agent, args=("a",))
        forget.start()
        forget.join(0.3)
        assert forget.is_alive()  # waits instead of being undone by the calibration's write
        cal.thresholds["a"] = 0.5  # what the running calibration writes
    forget.join(10)
    assert "a" not in cal.thresholds and "a" not in cal.calibrated_rows


def test_an_agent_named_empty_does_not_hide_the_global_count(opened):
    eng = opened()
    store_rows(eng, session_corpus()[:12], agent="")
    store_rows(eng, session_corpus()[12:24], agent="b")
    dim = eng.calibration.dim()
    assert startup.counts(eng.calibration, dim)[G] == 24


def test_an_agent_without_its_own_calibration_uses_the_stores(opened):
    eng = opened()
    store_rows(eng, session_corpus(), agent="x")
    store_rows(eng, session_corpus()[:20], agent="small")
    assert eng.calibrate_threshold("")["ok"]
    g = eng.calibration.gate_for("small")
    assert g.cosine_min == eng.calibration.global_threshold and g.cosine_z == eng.calibration.cosine_z[G]
    assert eng.get_recall_precision("small")["calibration"]["state"] == "global"
    assert eng.calibrate_threshold("small")["ok"]  # its own, once it has one
    assert eng.get_recall_precision("small")["calibration"]["state"] == "calibrated"
    assert eng.calibration.gate_for("small").cosine_z == eng.calibration.cosine_z["small"]


def test_cc_has_no_fused_gate_and_gates_rows_on_their_own_evidence(opened):
    eng = opened(recall_mode="cc")
    store_rows(eng, session_corpus())
    res = eng.calibrate_threshold("a")
    assert res["ok"] and res["fused_gate"] is None and "no fused gate" in res["fused_gate_note"]
    assert "a" not in eng.calibration.gates and eng.calibration.signal is None
    g = eng.calibration.gate_for("a")
    assert g.cosine_min == res["new_threshold"] and g.fused_gate is None and g.notice is None
    trace = {}
    out = recall(eng, "telescope nebula", trace=trace)
    assert "gate" not in out and trace["fused_gate"] is None and out["messages"]
    strict = eng.set_recall_precision("a", "strict")
    assert strict["ok"] and strict["beta"] == 2.0 and strict["fused_gate"] is None
    eng.close()
    again = opened(recall_mode="cc", calibrate_on_model_change=True)
    assert again.calibration.startup_done.wait(30)
    assert again.calibration.startup.action == "restored"  # no fused gate to calibrate at every start
