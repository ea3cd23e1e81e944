"""Recall with and without vectors through `Engine.recall`: the advisory of a degraded
(keyword-only) recall, backfill of rows stored while the embedding endpoint was down, the stored
vector format, and the vector retriever beside the keyword one (scope, scan window)."""

from __future__ import annotations

import numpy as np
import pytest
from cpersona.devtools.fake_embed import fake_vector
from cpersona.storage.codec import to_blob

from conftest import db_rows, wait_until
from quality_helpers import contents, recall, store_all

#: Storage semantics: every engine of this file runs on SQLite and on PostgreSQL (tests/backends.py).
pytestmark = pytest.mark.both_backends


# ------------------------------------------------------------- advisory
def test_advisory_hint_in_mode_none(engine_none):
    first = recall(engine_none, "anything")
    assert first["messages"] == []
    adv = first["advisory"]
    assert adv["degraded"] is True
    assert adv["severity"] == "hint"
    assert "embeddings disabled" in adv["reason"]
    assert "CPERSONA_EMBEDDING_URL" in adv["runbook"]  # full runbook the first time
    second = recall(engine_none, "anything else")["advisory"]
    assert second["severity"] == "hint"
    assert len(second["runbook"]) < len(adv["runbook"])  # short reminder afterwards
    assert engine_none.advisory.state == "hint"


def test_advisory_can_be_disabled(make_engine):
    eng = make_engine(degraded_advisory=False)
    assert "advisory" not in recall(eng, "anything")


def test_advisory_fault_on_first_degraded_recall_then_cleared(engine_http, fake_embed):
    engine_http.store("a", "adv-77 stored while healthy")
    assert "advisory" not in recall(engine_http, "adv-77 warmup")

    fake_embed.fail_next = 1
    blip = recall(engine_http, "adv-77 single blip")
    assert "advisory" not in blip  # the probe answered: a single blip is forgiven
    assert engine_http.advisory.state == "healthy"

    fake_embed.fail = True
    two = recall(engine_http, "adv-77 first failure")  # failed embed + failed probe = down
    adv = two["advisory"]
    assert adv["degraded"] is True and adv["severity"] == "fault"
    assert fake_embed.url in adv["evidence"]
    assert "CPERSONA_EMBEDDING_URL" in adv["runbook"]
    assert contents(two) == ["adv-77 stored while healthy"]

    three = recall(engine_http, "adv-77 third failure")["advisory"]
    assert three["severity"] == "fault" and len(three["runbook"]) < len(adv["runbook"])

    fake_embed.fail = False
    healed = recall(engine_http, "adv-77 after recovery")
    assert "advisory" not in healed
    assert engine_http.advisory.state == "healthy"
    assert "vector" in healed["messages"][-1]["match_reason"]["retrievers"]


def test_a_query_vector_that_does_not_come_in_time_leaves_a_keyword_recall_that_says_so(http_engine_factory,
                                                                                        monkeypatch):
    """A backend busy or stalled (a worker stopped mid-batch) costs a recall
    CPERSONA_EMBED_WAIT_SECS, not the backend's own deadline."""
    import threading
    import time

    eng = http_engine_factory(embed_wait_secs=0.2)
    eng.store("a", "late-42 the deploy runs nightly")
    embed, release = eng.gateway.embedder.embed, threading.Event()
    monkeypatch.setattr(eng.gateway.embedder, "embed", lambda texts: (release.wait(10), embed(texts))[1])
    try:
        started = time.monotonic()
        out = recall(eng, "late-42 deploy")
        waited = time.monotonic() - started
    finally:
        release.set()
    assert contents(out) == ["late-42 the deploy runs nightly"]
    assert "vector" not in out["messages"][-1]["match_reason"]["retrievers"]
    adv = out["advisory"]
    assert adv["severity"] == "fault" and "not ready in time" in adv["reason"]
    assert "CPERSONA_EMBED_WAIT_SECS" in adv["evidence"] and waited < 5
    assert wait_until(lambda: "advisory" not in recall(eng, "late-42 deploy"))  # the late vector came: healthy


# ------------------------------------------------------------- backfill
def test_a_store_whose_vector_does_not_come_in_time_is_kept_and_embedded_later(http_engine_factory, monkeypatch):
    import threading
    import time

    eng = http_engine_factory(embed_wait_secs=0.2, task_retry_delay=0.2)
    embed, release = eng.gateway.embedder.embed, threading.Event()
    monkeypatch.setattr(eng.gateway.embedder, "embed", lambda texts: (release.wait(10), embed(texts))[1])
    try:
        started = time.monotonic()
        res = eng.store("a", "late-43 the backup runs at noon")
        waited = time.monotonic() - started
    finally:
        release.set()
    assert res["result"] == "stored" and res["embedded"] is False and waited < 5
    eng.queue.wake()
    assert wait_until(lambda: db_rows(eng.db.path, "SELECT embedding IS NOT NULL FROM memories WHERE id = ?",
                                      (res["id"],)) == [(1,)]), eng.queue.last_error


def test_store_while_endpoint_down_is_backfilled(http_engine_factory, fake_embed):
    eng = http_engine_factory()  # default retry delay (30 s): only wake() brings the worker back early
    text = "she runs a marathon every spring"
    fake_embed.fail = True
    res = eng.store("a", text)
    assert res["result"] == "stored" and res["embedded"] is False
    assert db_rows(eng.db.path, "SELECT embedding FROM memories WHERE id = ?", (res["id"],)) == [(None,)]

    fake_embed.fail = False
    eng.queue.wake()
    assert wait_until(
        lambda: db_rows(eng.db.path, "SELECT embedding IS NOT NULL FROM memories WHERE id = ?", (res["id"],)) == [(1,)]
    ), eng.queue.last_error
    (blob,) = db_rows(eng.db.path, "SELECT embedding FROM memories WHERE id = ?", (res["id"],))[0]
    assert blob == to_blob(fake_vector(text))
    # now the vector retriever finds it for a query FTS cannot match
    msgs = recall(eng, "running marathons", deep=True)["messages"]
    assert [m["content"] for m in msgs] == [text]
    assert "vector" in msgs[0]["match_reason"]["retrievers"]


def test_writes_during_an_outage_are_backfilled_without_manual_wake(http_engine_factory, fake_embed):
    """store/archive_episode wake the idle worker themselves; its own retry (CPERSONA_TASK_RETRY_DELAY)
    picks the rows up once the endpoint answers again."""
    import time

    eng = http_engine_factory(task_retry_delay=0.1)
    assert wait_until(eng.queue.running)
    time.sleep(0.3)  # let the worker settle into its idle wait (an empty table) — not a timing assertion

    def nulls(table):
        return db_rows(eng.db.path, f"SELECT COUNT(*) FROM {table} WHERE embedding IS NULL")[0][0]

    fake_embed.fail = True
    ids = [eng.store("a", f"retry row {i}")["id"] for i in range(3)]
    assert nulls("memories") == 3
    fake_embed.fail = False
    assert wait_until(lambda: nulls("memories") == 0), eng.queue.last_error
    (blob,) = db_rows(eng.db.path, "SELECT embedding FROM memories WHERE id = ?", (ids[0],))[0]
    assert blob == to_blob(fake_vector("retry row 0"))

    fake_embed.fail = True
    assert eng.archive_episode("a", "episode stored while down")["embedded"] is False
    fake_embed.fail = False
    assert wait_until(lambda: nulls("episodes") == 0), eng.queue.last_error
    assert eng.queue.pending() == 0


def test_stored_vector_is_little_endian_float32_unit(engine_http):
    res = engine_http.store("a", "vector format check")
    assert res["embedded"] is True
    (blob,) = db_rows(engine_http.db.path, "SELECT embedding FROM memories WHERE id = ?", (res["id"],))[0]
    assert len(blob) == 4 * 512
    vec = np.frombuffer(blob, dtype="<f4")
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-4)
    assert np.allclose(vec, fake_vector("vector format check"))


# ---------------------------------------------------- vector vs keyword
MARATHON_ROWS = ["running late for the meeting", "she runs a marathon every spring", "marathon training plan for runners"]
FILLERS = [f"filler note number {i} about gardening and compost" for i in range(60)]


def test_word_index_finds_inflections_and_vector_adds_its_cosine(make_engine, http_engine_factory):
    # no background calibration: its moment (load-dependent) would decide the vector threshold
    kw = make_engine("kw.db", recall_mode="rrf", calibrate_on_model_change=False)
    hy = http_engine_factory("hy.db", recall_mode="rrf", calibrate_on_model_change=False)
    for eng in (kw, hy):
        store_all(eng, MARATHON_ROWS + FILLERS)

    trace = {}
    kw_res = recall(kw, "running marathons", trace=trace, deep=True)
    # the word index matches stems (running/runs → run, marathons → marathon); trigram alone found one row
    assert set(contents(kw_res)) == set(MARATHON_ROWS)

    hy_res = recall(hy, "running marathons")
    got = {m["content"]: m["match_reason"] for m in hy_res["messages"]}
    assert "she runs a marathon every spring" in got
    assert "marathon training plan for runners" in got
    assert "vector" in got["she runs a marathon every spring"]["retrievers"]
    assert got["she runs a marathon every spring"]["cosine"] is not None
    assert not any(c.startswith("filler") for c in got)
    assert "vector" in got[contents(hy_res)[-1]]["retrievers"]  # the best row: found by both channels


@pytest.mark.sqlite_only("two processes on one file (tests/storage/test_postgres.py has the nodes)")
def test_second_engine_on_same_file_is_seen_by_vector_search(http_engine_factory):
    first = http_engine_factory("shared.db")
    second = http_engine_factory("shared.db")
    assert recall(first, "running marathons", deep=True)["messages"] == []
    assert first.steps.indexes() is not None  # resident index loaded

    assert second.store("a", "marathon training plan for runners")["embedded"] is True
    msgs = recall(first, "running marathons", deep=True)["messages"]
    assert [m["content"] for m in msgs] == ["marathon training plan for runners"]
    assert "vector" in msgs[0]["match_reason"]["retrievers"]


def test_vector_window_limits_only_the_vector_channel(http_engine_factory):
    eng = http_engine_factory(max_memories=1)
    store_all(eng, ["marathon training plan for runners", "unrelated newest row about taxes"])
    # the only embedded row in the 1-row window is the newest one, so the vector channel misses the older row
    trace: dict = {}
    recall(eng, "running marathons", trace=trace, deep=True)
    assert trace["channels"]["vector"] == 0
    # FTS/LIKE still see everything
    assert contents(recall(eng, "training plan")) == ["marathon training plan for runners"]


def test_out_of_scope_vectors_do_not_crowd_out_in_scope_rows(engine_http):
    """The vector top-`limit` is taken INSIDE the scope: a perfect match in another project or
    agent must not use up the slots (rows are re-checked in SQL afterwards, which would hide it)."""
    query = "crowd-1 lighthouse keeper schedule"
    engine_http.store("a", query, project_id="P")  # cosine 1.0, other project
    engine_http.store("b", query)  # cosine 1.0, other agent
    engine_http.store("a", query + " for the winter season")  # global pool, in scope for project Q
    msgs = recall(engine_http, query, limit=1, project_id="Q")["messages"]
    assert [m["content"] for m in msgs] == [query + " for the winter season"]
    assert "vector" in msgs[0]["match_reason"]["retrievers"]


def test_vector_window_is_taken_inside_the_scope(http_engine_factory):
    eng = http_engine_factory(max_memories=1)
    eng.store("a", "marathon training plan for runners")
    eng.store("b", "newer row of another agent about taxes")
    msgs = recall(eng, "running marathons", deep=True)["messages"]
    assert [m["content"] for m in msgs] == ["marathon training plan for runners"]
    assert "vector" in msgs[0]["match_reason"]["retrievers"]
