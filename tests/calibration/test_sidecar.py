"""The calibration sidecar: atomic, fingerprinted, restored at restart, shared by servers on one
file (both entries kept, erasures carried), corrupt / lost / stale ⇒ heuristic gate AND a
visible notice."""

from __future__ import annotations

import json
import math

import pytest
from cpersona.calibration import sidecar
from cpersona.calibration import state as cal_state
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration_fixtures import sidecar_path
from conftest import db_rows, wait_until
from quality_helpers import recall, session_corpus, store_rows


def test_sidecar_is_written_atomically_with_a_fingerprint(calibrated):
    eng, res = calibrated
    path = sidecar_path(eng)
    data = json.loads(path.read_text())
    assert data["scoring_version"] == cal_state.scoring_version(eng.settings) == f"{cal_state.SCORING_VERSION}/rsf/alpha=auto/nb=auto"
    assert (data["embedding_model"], data["embedding_dim"]) == ("hash-512", 512)
    assert data["agent_thresholds"]["a"] == res["new_threshold"]
    assert data["agent_fused_gates"]["a"] == res["fused_gate"]["threshold"] and data["fused_gate_signal"] == "rsf"
    assert not list(path.parent.glob(path.name + ".tmp.*"))
    assert db_rows(eng.settings.db_file, "SELECT COUNT(*) FROM cpersona_meta WHERE key = 'calibration'")[0][0] == 1
    assert res["sidecar_persisted"] is True


def test_two_servers_saving_at_once_keep_both_entries(tmp_path):
    """Two servers on one file (two Databases: their own connections, as two processes have)
    save the sidecar at the same moment: the second waits for the first's write lock and
    merges its entry, instead of renaming its own read over it."""
    import threading
    import time

    from cpersona.calibration.store import SidecarStore
    from cpersona.storage.db import Database

    path = tmp_path / "two.db"
    dbs = [Database(str(path)), Database(str(path))]
    target = sidecar.path_for(path)
    inside = threading.Event()

    def build(agent, value, pause):
        def merged(current):
            if pause:
                inside.set()
                time.sleep(0.3)  # the other server saves meanwhile
            held = current.data.get("agent_thresholds", {}) if current.status == "ok" else {}
            return {"format": sidecar.FORMAT, "agent_thresholds": {**held, agent: value},
                    "calibrated_at": f"2026-12-01T00:00:0{int(pause)}+00:00"}
        return merged

    try:
        stores = [SidecarStore(target, db) for db in dbs]
        first = threading.Thread(target=lambda: stores[0].save(build("a", 0.4, True)))
        first.start()
        assert inside.wait(5)
        assert stores[1].save(build("b", 0.5, False)) == ""
        first.join(5)
        assert json.loads(target.read_text())["agent_thresholds"] == {"a": 0.4, "b": 0.5}
    finally:
        for db in dbs:
            db.close()


def test_an_agent_erased_by_one_server_is_not_written_back_by_another(factory):
    """Server B calibrated x; server A (started before, so it never loaded x) erases x: the
    file loses x, and B's next save does not write its old entry back."""
    a, b = factory(), factory()
    store_rows(b, session_corpus(), agent="x")
    store_rows(b, session_corpus(), agent="y")
    assert b.calibrate_threshold("x")["ok"]
    assert "x" in json.loads(sidecar_path(b).read_text())["agent_thresholds"]
    assert a.delete_agent_data("x")["ok"]
    assert "x" not in json.loads(sidecar_path(a).read_text())["agent_thresholds"]
    assert b.calibrate_threshold("y")["ok"]
    assert list(json.loads(sidecar_path(b).read_text())["agent_thresholds"]) == ["y"]
    assert b.get_recall_precision("x")["calibration"]["state"] != "calibrated"


def test_an_agent_calibrated_again_after_an_erase_elsewhere_is_kept(factory):
    b, a = factory(), factory()
    store_rows(b, session_corpus(), agent="x")
    assert b.calibrate_threshold("x")["ok"]
    assert a.delete_agent_data("x")["ok"]
    store_rows(b, session_corpus(), agent="x")  # the agent comes back with new rows
    res = b.calibrate_threshold("x")
    assert res["ok"] and res["sidecar_persisted"]
    data = json.loads(sidecar_path(b).read_text())
    assert "x" in data["agent_thresholds"] and "x" not in data["erased_agents"]
    assert b.get_recall_precision("x")["calibration"]["state"] == "calibrated"


def test_entries_a_server_of_other_settings_left_out_are_no_erasure(factory):
    """D (other ranking settings) rewrites the file without B's entries, A (B's settings)
    rewrites it after D: B's next save keeps B's own calibrations and adds A's."""
    b, a = factory(), factory()
    store_rows(b, session_corpus(), agent="x")
    store_rows(b, session_corpus(), agent="y")
    store_rows(b, session_corpus(), agent="z")
    assert b.calibrate_threshold("x")["ok"] and b.calibrate_threshold("y")["ok"]
    d = factory(neighbour_weight=0.3)
    assert d.calibrate_threshold("y")["ok"]
    assert a.calibrate_threshold("z")["ok"]
    assert b.calibrate_threshold("y")["ok"]
    assert set(json.loads(sidecar_path(b).read_text())["agent_thresholds"]) == {"x", "y", "z"}
    assert b.get_recall_precision("x")["calibration"]["state"] == "calibrated"


def test_a_server_picks_up_what_another_server_on_the_file_calibrated(factory):
    """B runs beside A on one file: A's calibration reaches B's gate without B calibrating
    (calibration/sync.py), so the same query gets the same gate from both; B's own later
    calibration of another agent keeps A's entry, and an erasure by A reaches B."""
    from cpersona.calibration import sync

    a = factory()
    store_rows(a, session_corpus(), agent="x")
    store_rows(a, session_corpus(), agent="y")
    b = factory()
    b.calibration.watch = sync.StoreWatch(b.calibration.store.stamp, every_s=0.0)
    assert b.calibration.gate_for("x").cosine_min is None  # nothing calibrated yet: heuristic
    res = a.calibrate_threshold("x")
    assert res["ok"]
    gate_a, gate_b = a.calibration.gate_for("x"), b.calibration.gate_for("x")
    assert gate_b.cosine_min == gate_a.cosine_min == res["new_threshold"]
    assert (gate_b.fused_gate, gate_b.cosine_z) == (gate_a.fused_gate, gate_a.cosine_z)
    assert b.get_recall_precision("x")["calibration"]["state"] == "calibrated"
    assert recall(b, "telescope nebula", agent="x") == recall(a, "telescope nebula", agent="x")
    assert b.calibrate_threshold("y")["ok"]
    assert set(json.loads(sidecar_path(b).read_text())["agent_thresholds"]) == {"x", "y"}
    assert a.delete_agent_data("x")["ok"]
    b.calibration.gate_for("x")
    assert "x" not in b.calibration.thresholds


def _watching(*engines):
    from cpersona.calibration import sync

    for eng in engines:
        eng.calibration.watch = sync.StoreWatch(eng.calibration.store.stamp, every_s=0.0)
    return engines


def test_a_precision_cleared_on_one_server_is_cleared_on_the_other_and_stays_cleared(factory):
    a, b = _watching(factory(), factory())
    store_rows(a, session_corpus(), agent="x")
    store_rows(a, session_corpus(), agent="y")
    assert a.calibrate_threshold("x")["ok"] and a.set_recall_precision("x", "strict")["ok"]
    assert b.calibration.gate_for("x").beta == 2.0
    assert a.set_recall_precision("x", "")["cleared"]
    assert b.calibration.gate_for("x").beta == a.calibration.gate_for("x").beta == 1.0
    assert b.calibrate_threshold("y")["ok"]  # an unrelated save of B's
    assert "x" not in json.loads(sidecar_path(b).read_text())["agent_betas"]
    assert factory().calibration.gate_for("x").beta == 1.0  # a server started now


def test_an_unrelated_save_never_writes_an_older_calibration_over_a_newer_one(factory):
    """B calibrated x (and the store-wide threshold) first, A again later with other arguments;
    B's next save, about another agent, keeps A's newer numbers."""
    a, b = _watching(factory(), factory())
    store_rows(a, session_corpus(), agent="x")
    store_rows(a, session_corpus(), agent="z")
    old_x = b.calibrate_threshold("x", method="percentile", percentile=90)["new_threshold"]
    old_global = b.calibrate_threshold("", method="percentile", percentile=90)["new_threshold"]
    new_x = a.calibrate_threshold("x", method="percentile", percentile=99)["new_threshold"]
    new_global = a.calibrate_threshold("", method="percentile", percentile=99)["new_threshold"]
    assert (new_x, new_global) != (old_x, old_global)
    b.calibration.watch = _frozen()  # B has not looked at the store since
    assert b.set_recall_precision("z", "strict")["ok"]
    data = json.loads(sidecar_path(b).read_text())
    assert data["agent_thresholds"]["x"] == new_x and data["global_threshold"] == new_global
    assert b.calibration.thresholds["x"] == new_x and b.calibration.global_threshold == new_global


def _frozen():
    from cpersona.calibration import sync

    return sync.StoreWatch(lambda: None, every_s=3600)


def test_a_store_written_with_other_settings_is_not_picked_up(factory):
    from cpersona.calibration import sync

    b = factory()
    store_rows(b, session_corpus(), agent="x")
    b.calibration.watch = sync.StoreWatch(b.calibration.store.stamp, every_s=0.0)
    d = factory(neighbour_weight=0.3)  # another scoring version: its numbers mean something else here
    assert d.calibrate_threshold("x")["ok"]
    assert b.calibration.gate_for("x").cosine_min is None and "x" not in b.calibration.thresholds


def test_the_store_is_looked_at_once_per_interval():
    from cpersona.calibration import sync

    stamps = iter(range(100))
    looks: list[int] = []

    def stamp():
        looks.append(1)
        return next(stamps)

    watch = sync.StoreWatch(stamp, every_s=3600)
    assert not any(watch.changed() for _ in range(1000))  # within the interval: no stat at all
    assert len(looks) == 1  # the stamp read when the watch was made


def test_calibration_survives_restart(calibrated, factory):
    eng, res = calibrated
    eng.close()
    again = factory()
    g = again.calibration.gate_for("a")
    assert g.cosine_min == res["new_threshold"] and g.fused_gate == res["fused_gate"]["threshold"]
    assert again.calibration.startup.action == "restored"
    out = recall(again, "telescope nebula")
    assert "gate" not in out and out["messages"]


def test_corrupt_sidecar_falls_back_to_the_heuristic_and_says_so(calibrated, factory):
    eng, _ = calibrated
    eng.close()
    sidecar_path(eng).write_text("{not json")
    again = factory()
    assert again.calibration.gate_for("a").cosine_min is None
    trace = {}
    out = recall(again, "telescope nebula", trace=trace)
    assert trace["fused_gate"] is None
    assert out["gate"]["state"] == "heuristic" and "unreadable" in out["gate"]["reason"]
    assert again.get_recall_precision("a")["calibration"]["sidecar"] == "corrupt"


def test_wrong_shape_sidecar_is_corrupt_too(calibrated, factory):
    eng, _ = calibrated
    eng.close()
    sidecar_path(eng).write_text(json.dumps({"agent_thresholds": {"a": "high"}}))
    assert "not a finite number" in recall(factory(), "nebula")["gate"]["reason"]


@pytest.mark.parametrize(("key", "value"), [
    ("agent_thresholds", 1e308), ("agent_thresholds", -5), ("global_threshold", 1e308),
    ("agent_fused_gates", 1e308), ("agent_fused_gates", -5), ("global_fused_gate", -5), ("agent_betas", -5),
])
def test_impossible_numbers_make_the_sidecar_corrupt_instead_of_disabling_search(calibrated, factory, key, value):
    eng, _ = calibrated
    eng.close()
    data = json.loads(sidecar_path(eng).read_text())
    data[key] = {"a": value} if key.startswith("agent_") else value
    sidecar_path(eng).write_text(json.dumps(data))
    again = factory()
    gate = again.calibration.gate_for("a")
    assert gate.cosine_min is None and gate.fused_gate is None  # the heuristic gate, as for an unreadable file
    out = recall(again, "telescope nebula")
    assert out["messages"], "vector search must not be switched off by an impossible threshold"
    assert out["gate"]["state"] == "heuristic" and "unreadable" in out["gate"]["reason"]
    assert "outside" in out["gate"]["reason"]
    assert again.get_recall_precision("a")["calibration"]["sidecar"] == "corrupt"


_NUMBER = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6))


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(["agent_thresholds", "global_threshold", "agent_fused_gates", "global_fused_gate",
                            "agent_betas"]),
       signal=st.sampled_from(sorted(sidecar.SIGNAL_RANGES)), value=_NUMBER)
def test_a_sidecar_number_is_accepted_exactly_when_it_is_within_its_range(key, signal, value):
    data = {"fused_gate_signal": signal, key: {"a": value} if key.startswith("agent_") else value}
    lo, hi = {"agent_thresholds": sidecar.THRESHOLD_RANGE, "global_threshold": sidecar.THRESHOLD_RANGE,
              "agent_betas": sidecar.BETA_RANGE}.get(key, sidecar.SIGNAL_RANGES[signal])
    within = math.isfinite(value) and lo <= value <= hi
    assert (sidecar.validate(data) == "") is within, (data, sidecar.validate(data))


def test_lost_sidecar_is_recognised_and_reported(calibrated, factory):
    eng, _ = calibrated
    eng.close()
    sidecar_path(eng).unlink()
    out = recall(factory(), "telescope nebula")
    assert "missing" in out["gate"]["reason"] and "calibrate_threshold" in out["gate"]["fix"]


def test_a_changed_cc_alpha_makes_the_sidecar_stale(calibrated, factory):
    eng, _ = calibrated
    eng.close()
    reason = recall(factory(cc_alpha=0.5), "nebula")["gate"]["reason"]
    assert "stale" in reason and "alpha=0.5" in reason
    assert "gate" not in recall(factory(), "nebula")  # same settings: the sidecar applies


def test_stale_fingerprint_is_not_applied_and_recalibrates_in_the_background(calibrated, factory):
    eng, _res = calibrated
    eng.close()
    path = sidecar_path(eng)
    data = json.loads(path.read_text())
    data["scoring_version"] = "old-scoring"
    data["agent_betas"] = {"a": 2.0}
    path.write_text(json.dumps(data))
    frozen = factory()  # CALIBRATE_ON_MODEL_CHANGE off: stale gates never applied, notice shown
    assert "stale" in recall(frozen, "nebula")["gate"]["reason"]
    assert frozen.calibration.beta("a") == 2.0  # β overrides survive staleness
    frozen.close()
    live = factory(calibrate_on_model_change=True)
    assert wait_until(lambda: live.calibration.startup.finished_at != "", timeout=60)
    assert live.calibration.gate_for("a").cosine_min is not None
    assert live.calibration.startup.action == "recalibrated"
    assert "gate" not in recall(live, "nebula")
    assert list(path.parent.glob(path.name + ".before-old-scoring-*"))
    assert json.loads(path.read_text())["scoring_version"] == cal_state.scoring_version(live.settings)
    assert live.calibration.beta("a") == 2.0


def test_changed_embedding_model_makes_the_gates_stale(calibrated, factory):
    from quality_helpers import HashEmbedder

    eng, _ = calibrated
    eng.close()
    other = factory(embedder=HashEmbedder("another-model"))
    out = recall(other, "telescope nebula")  # the first embed reconciles: a new model
    assert out["gate"]["state"] == "heuristic" and "model changed" in out["gate"]["reason"]


def test_startup_calibrates_an_uncalibrated_corpus_without_blocking(factory, engines):
    eng = factory()
    store_rows(eng, session_corpus())
    eng.close()
    engines.remove(eng)
    live = factory(calibrate_on_model_change=True)
    assert wait_until(lambda: live.calibration.startup.finished_at != "", timeout=60)
    assert live.calibration.gate_for("a").cosine_min is not None
    assert live.calibration.startup.action == "initial" and sidecar_path(live).exists()


def test_unwritable_sidecar_reports_instead_of_failing(calibrated, monkeypatch):
    eng, _ = calibrated
    monkeypatch.setattr(sidecar, "write_atomic", lambda path, payload: "PermissionError: read-only folder")
    res = eng.calibrate_threshold("a")
    assert res["ok"] is True and res["sidecar_persisted"] is False and "read-only" in res["sidecar_error"]


