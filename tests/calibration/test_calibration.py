"""Calibration of the quality gate (its statistics: test_stats.py; its file: test_sidecar.py): argument
bounds, precision β, forgetting an agent, isolation, and the exact-match rule under a calibrated gate."""

from __future__ import annotations

import json
import math

import pytest
from cpersona.calibration import fused, precision
from cpersona.errors import InvalidArgument
from cpersona.service.requests import RecallRequest

from calibration_fixtures import sidecar_path
from quality_helpers import contents, make, recall, session_corpus, store_rows


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

