"""Calibration of the quality gate (its statistics: test_stats.py): argument bounds, the sidecar (atomic, fingerprinted,
restored at restart, corrupt / lost / stale ⇒ heuristic gate AND a visible notice),
precision β, forgetting an agent, isolation, and the exact-match rule under a calibrated gate."""

from __future__ import annotations

import json
import math

import pytest
from cpersona.calibration import fused, precision, sidecar
from cpersona.calibration import state as cal_state
from cpersona.errors import InvalidArgument
from cpersona.retrieval.pipeline import RecallRequest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import db_rows, wait_until
from quality_helpers import contents, make, recall, session_corpus, store_rows


@pytest.fixture
def db(tmp_path):
    return tmp_path / "cal.db"


@pytest.fixture
def engines():
    made = []
    yield made
    for eng in reversed(made):
        eng.close()


@pytest.fixture
def factory(db, engines):
    def build(**overrides):
        overrides.setdefault("recall_mode", "rsf")  # a fused gate is calibrated on rsf / rrf, not cc (test_cc_*)
        eng = make(db, **overrides)
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


# ------------------------------------------------------------ argument bounds
@pytest.mark.parametrize("kwargs, argument", [
    ({"sample_size": True}, "sample_size"),
    ({"sample_size": 1.5}, "sample_size"),
    ({"percentile": 150}, "percentile"),
    ({"percentile": -0.5}, "percentile"),
    ({"percentile": math.nan}, "percentile"),
    ({"z_factor": math.inf}, "z_factor"),
    ({"method": "magic"}, "method"),
    ({"method": 3}, "method"),
])
def test_caller_arguments_are_bounded_and_validated(factory, kwargs, argument):
    eng = factory()
    with pytest.raises(InvalidArgument) as err:
        eng.calibrate_threshold("a", **kwargs)
    assert err.value.argument == argument


def test_defaults_and_percent_form(factory):
    s = factory().settings
    req = precision.parse_request(s, "a", percentile=95)
    assert (req.sample_size, req.percentile, req.method, req.z_factor) == (200, 0.95, "separation", 1.0)
    assert precision.parse_request(s, "a", sample_size=15, method="ZSCORE").method == "zscore"
    # out-of-range sizes and z-factors are clamped, as the original clamps them
    assert precision.parse_request(s, "a", sample_size=-1).sample_size == 1
    assert precision.parse_request(s, "a", sample_size=10**6).sample_size == s.calibrate_max_sample
    assert precision.parse_request(s, "a", z_factor=11).z_factor == 10


def test_sample_size_is_capped_by_the_setting(factory):
    eng = factory(calibrate_max_sample=30)
    store_rows(eng, session_corpus())
    res = eng.calibrate_threshold("a", sample_size=31, method="percentile")  # clamped to the cap
    assert res["sampled_embeddings"] == 30
    res = eng.calibrate_threshold("a", sample_size=30, method="percentile")
    assert res["sampled_embeddings"] == 30 and res["num_pairs"] == 30 * 29 // 2


# ------------------------------------------------------------- calibration
def test_too_few_embeddings_fail_and_say_how_many(factory):
    eng = factory()
    store_rows(eng, session_corpus(1, 5))
    res = eng.calibrate_threshold("a")
    assert res["ok"] is False and "found 5" in res["error"]
    # the failure is not silent in recall either
    assert "calibration failed" in recall(eng, "kubernetes")["gate"]["reason"]


def test_mode_none_cannot_calibrate(tmp_path):
    eng = make(tmp_path / "n.db", embedder=None)
    try:
        res = eng.calibrate_threshold("a")
        assert res["ok"] is False and "CPERSONA_EMBEDDING_MODE=none" in res["error"]
        assert "gate" not in recall(eng, "x")  # nothing is wrong: the heuristic is the only gate there is
    finally:
        eng.close()


def test_separation_on_sessions_measures_threshold_weight_and_fused_gate(calibrated):
    eng, res = calibrated
    assert res["proxy_source"] == "temporal" and res["youden_j"] > 0.5
    assert res["null_admit_rate"] < 0.2 and res["pos_admit_rate"] > 0.8
    fused = res["fused_gate"]
    assert fused["signal"] == "rsf" and fused["beta"] == 1.0 and len(fused["threshold_draws"]) == 5
    assert fused["pos_admit_rate"] >= fused["min_keep"] == 0.9
    trace = {}
    recall(eng, "telescope nebula", trace=trace)
    assert trace["fused_gate"] == fused["threshold"] and trace["gate_signal"] == "rsf"
    assert "note" not in eng.get_recall_precision("a")
    assert eng.get_recall_precision("nobody")["note"] == "agent 'nobody' has no memories or episodes yet"
    status = eng.get_recall_precision("a")["calibration"]
    assert status["state"] == "calibrated" and status["vector_threshold"] == res["new_threshold"]


def test_burst_loaded_corpus_falls_back_to_nearest_neighbours(factory):
    eng = factory()
    rows = [(c, "2026-02-01T10:00:00+00:00") for c, _ in session_corpus()]  # one burst: no session structure
    store_rows(eng, rows)
    res = eng.calibrate_threshold("a")
    assert res["ok"] and res["proxy_source"] == "nn_fallback" and "session" in res["proxy_note"]
    assert res["fused_gate"] is None or res["fused_gate"]["proxy_source"] == "semantic"


def test_rows_close_in_time_but_unrelated_are_no_session(factory):
    """Facts given timestamps that put unrelated rows side by side (each pair a minute apart,
    never on one topic): those pairs are no more alike than random ones, so they are not used
    as the related rows; the answer says why."""
    from datetime import datetime, timedelta
    t0 = datetime.fromisoformat("2026-01-05T09:00:00+00:00")
    topics = [c for c, _ in session_corpus()]  # 5 topics × 14 rows, in topic order
    rows = [(topics[(i % 5) * 14 + i // 5], (t0 + timedelta(hours=3 * (i // 2), minutes=i % 2)).isoformat())
            for i in range(70)]
    eng = factory()
    store_rows(eng, rows)
    res = eng.calibrate_threshold("a")
    assert res["ok"] and res["proxy_source"] == "nn_fallback", res
    assert "no more alike than random pairs" in res["proxy_note"]


@pytest.mark.parametrize("method", ["percentile", "zscore"])
def test_other_methods(factory, method):
    eng = factory()
    store_rows(eng, session_corpus())
    res = eng.calibrate_threshold("a", method=method, percentile=0.9, z_factor=1.5)
    dist = res["distribution"]
    if method == "zscore":
        assert res["new_threshold"] == pytest.approx(max(dist["mean"] + 1.5 * dist["std"], 0.05), abs=2e-4)
    else:
        assert res["null_admit_rate"] == pytest.approx(0.1, abs=0.01)


def test_global_calibration_sets_the_default_threshold(factory):
    eng = factory()
    store_rows(eng, session_corpus(), agent="x")
    store_rows(eng, session_corpus(), agent="y")
    res = eng.calibrate_threshold("")
    assert res["scope"] == "global" and res["sampled_embeddings"] == 140 and "fused_gate" not in res
    assert eng.calibration.vector_threshold("never-seen") == res["new_threshold"]


def test_calibration_samples_only_the_agents_own_rows(factory):
    eng = factory()
    store_rows(eng, session_corpus(), agent="a")
    store_rows(eng, session_corpus(2, 6), agent="b")
    assert eng.calibrate_threshold("a")["sampled_embeddings"] == 70
    assert eng.calibrate_threshold("b")["sampled_embeddings"] == 12
    assert eng.calibration.gate_for("c").cosine_min is None  # another agent's calibration is not borrowed


# -------------------------------------------------------------- the sidecar
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
    from cpersona.storage import Database

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


# ------------------------------------------------------------- precision β
def test_set_recall_precision_moves_the_gate_at_once(calibrated):
    eng, res = calibrated
    balanced = res["fused_gate"]["threshold"]
    out = eng.set_recall_precision("a", "strict")
    assert out["ok"] and out["beta"] == 2.0 and out["precision"] == "strict" and out["fused_gate"]["beta"] == 2.0
    assert out["fused_gate"]["threshold"] >= balanced
    trace = {}
    recall(eng, "nebula", trace=trace)
    assert trace["fused_gate"] == out["fused_gate"]["threshold"]
    got = eng.get_recall_precision("a")
    assert (got["precision"], got["beta"], got["overridden"], got["global_beta"]) == ("strict", 2.0, True, 1.0)
    assert eng.set_recall_precision("a", beta=0.7)["precision"] == "custom"
    cleared = eng.set_recall_precision("a")
    assert cleared["cleared"] is True and cleared["beta"] == 1.0 and cleared["precision"] == "default"
    assert eng.get_recall_precision("a")["overridden"] is False
    assert "a" not in json.loads(sidecar_path(eng).read_text())["agent_betas"]


def test_set_recall_precision_rules(calibrated):
    eng, _ = calibrated
    with pytest.raises(InvalidArgument):
        eng.set_recall_precision("a", "paranoid")
    with pytest.raises(InvalidArgument):
        eng.set_recall_precision("", "strict")
    with pytest.raises(InvalidArgument):
        eng.set_recall_precision("a", beta=101)
    before = eng.get_recall_precision("nobody")
    failed = eng.set_recall_precision("nobody", "strict")  # nothing to calibrate ⇒ rolled back
    assert failed["ok"] is False and "unchanged" in failed["error"]
    assert eng.get_recall_precision("nobody") == before  # no failure note left behind either
    assert eng.get_recall_precision("nobody")["overridden"] is False


def test_paused_calibration_tools_validate_then_skip(calibrated):
    eng, _res = calibrated
    eng.pause_persistence(60)
    with pytest.raises(InvalidArgument):
        eng.calibrate_threshold("a", method="magic")
    skipped = eng.calibrate_threshold("a")
    assert skipped["persisted"] is False and skipped["new_threshold"] is None and skipped["sampled_embeddings"] == 0
    body = eng.set_recall_precision("a", "strict")
    assert body["persisted"] is False and body["fused_gate"] is None and body["calibrate"] is None
    assert eng.calibration.beta("a") == 1.0
    eng.resume_persistence()


def test_precision_from_settings(factory):
    eng = factory(recall_precision="strict")
    assert eng.get_recall_precision("z")["global_beta"] == 2.0
    assert factory(fused_gate_beta=3.0).get_recall_precision("z")["global_precision"] == "custom"


# ----------------------------------------------------------- forget, isolation
def test_forget_agent_drops_its_entries_everywhere(calibrated):
    eng, _ = calibrated
    eng.set_recall_precision("a", "lenient")
    assert eng.calibration.forget_agent("a") >= 3
    assert eng.calibration.gate_for("a").cosine_min is None
    data = json.loads(sidecar_path(eng).read_text())
    assert "a" not in data["agent_thresholds"] and "a" not in data["agent_fused_gates"] and "a" not in data["agent_betas"]


def test_delete_agent_data_forgets_the_calibration(calibrated):
    eng, _ = calibrated
    out = eng.delete_agent_data("a")
    assert out["deleted_calibration"] >= 2
    assert "a" not in json.loads(sidecar_path(eng).read_text())["agent_thresholds"]


# -------------------------------------------------- the gate and exact matches
def test_a_calibrated_gate_never_empties_an_exact_identifier_match(calibrated):
    eng, _ = calibrated
    eng.store("a", "rollback of kubernetes release ERR_TIMEOUT_1750 on ingress", timestamp="2026-01-05T09:30:00+00:00")
    eng.calibration.gates["a"] = 0.99  # a gate nothing but an exact match can pass
    out = recall(eng, "ERR_TIMEOUT_1750")
    assert contents(out) == ["rollback of kubernetes release ERR_TIMEOUT_1750 on ingress"]
    trace: dict = {}
    rows = eng.recall(RecallRequest("a", "rollout", 10), trace=trace)["messages"]
    bg = trace["background"]  # the calibrated cut sits z σ into this query's own cosines (gate.query_cosine_cut)
    cut = bg["mean"] + eng.calibration.cosine_z["a"] * bg["std"]
    assert all(m["match_reason"]["cosine"] >= cut - 1e-9 for m in rows)


def test_gate_disabled_keeps_every_scored_row(calibrated, factory):
    eng, _ = calibrated
    eng.calibration.gates["a"] = 0.99
    gated = len(recall(eng, "nebula galaxy")["messages"])
    eng.close()
    ungated = factory(gate_enabled=False)
    assert len(recall(ungated, "nebula galaxy")["messages"]) > gated


def test_a_gate_kept_heuristic_is_reported_and_not_recalibrated_at_every_start(factory, engines, monkeypatch):
    monkeypatch.setattr(fused, "MIN_GATE_J", 2.0)  # no corpus separates that well: the heuristic is kept
    eng = factory()
    store_rows(eng, session_corpus())
    res = eng.calibrate_threshold("a")
    assert res["fused_gate"] is None and "heuristic gate is kept" in res["fused_gate_note"]
    assert res["fused_gate_measured"]["youden_j"] is not None
    assert "gate" not in recall(eng, "nebula")  # measured, nothing to fix: no notice
    eng.close()
    engines.remove(eng)
    again = factory(calibrate_on_model_change=True)
    assert again.calibration.startup_done.wait(30)
    assert again.calibration.startup.action == "restored" and not again.calibration.startup.finished_at


def test_gate_rules_with_calibrated_thresholds():
    from cpersona.retrieval.candidate import MEMORY, PROFILE, Candidate
    from cpersona.retrieval.gate import Gate

    g = Gate(pool=100, min_score=0.2, rrf_k=60, blank_query=False, needles=("err_42",), fused_gate=0.5,
             gate_signal="cc", cosine_min=0.6)

    def cc_row(**kw):
        return Candidate(MEMORY, 1, kw.pop("text", "x"), **kw)

    assert g.passes(cc_row(cc=0.55, lexical=0.7)) and not g.passes(cc_row(cc=0.45, lexical=0.56))
    assert g.passes(cc_row(cc=0.1, cosine=0.65))  # vector evidence above the calibrated threshold
    assert g.passes(cc_row(cc=0.0, lexical=0.0, text="see ERR_42"))  # exact match
    rrf_vector = Gate(pool=100, min_score=0.2, rrf_k=60, blank_query=False, needles=(), cosine_min=0.6)
    assert not rrf_vector.passes(cc_row(rrf=0.03, cosine=0.5)) and rrf_vector.passes(cc_row(rrf=0.03, cosine=0.61))
    assert not Gate(pool=49, min_score=0.2, rrf_k=60, blank_query=False, needles=()).passes(Candidate(PROFILE, -1, "p"))
    assert Gate(pool=49, min_score=0.2, rrf_k=60, blank_query=False, needles=(), enabled=False).passes(cc_row(cc=0.0))

