"""Valid timestamps at the edges of the calendar, with offsets, never fail a call:
`0001-01-01T00:00:00+14:00` is 0000-12-31T10:00Z, outside Python's datetime range, and used
to raise OverflowError in store, archive_episode's history and recall_with_context (where one
such context entry failed the whole call)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from cpersona.service.requests import RecallRequest
from cpersona.util.time import parse_ts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import db_rows

EDGES = ["0001-01-01T00:00:00+14:00", "0001-01-01T00:00:00-14:00", "9999-12-31T23:59:59-14:00",
         "9999-12-31T23:59:59.999999+14:00", "0001-01-01T00:00:00Z"]


@pytest.mark.parametrize("confidence", [False, True])
def test_edge_timestamps_are_stored_archived_and_merged(make_engine, confidence):
    eng = make_engine(confidence_enabled=confidence)
    for i, stamp in enumerate(EDGES):
        assert eng.store("kai", f"edge memory {i} about comets", timestamp=stamp)["result"] == "stored"
    episode = eng.archive_episode("kai", "an edge session about comets", history=[{"timestamp": t} for t in EDGES])
    assert episode["ok"] is True
    start, end = db_rows(eng.db.path, "SELECT start_time, end_time FROM episodes")[0]
    assert (start, end) == ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00")  # by instant, not by text
    context = [{"role": "user", "content": f"said at {t}", "timestamp": t} for t in EDGES]
    merged = eng.recall_with_context(RecallRequest(agent_id="kai", query="comets"), external_context=context)
    said = [m["timestamp"] for m in merged["messages"] if m["content"].startswith("said at")]
    assert [parse_ts(t) for t in said] == sorted(parse_ts(t) for t in EDGES)
    assert any(m["content"].startswith("edge memory") for m in merged["messages"])


def test_out_of_range_instants_clamp_to_the_calendar_edges():
    assert parse_ts("0001-01-01T00:00:00+14:00") == datetime.min.replace(tzinfo=UTC)
    assert parse_ts("9999-12-31T23:59:59-14:00") == datetime.max.replace(tzinfo=UTC)
    assert parse_ts("0001-01-01T00:00:00-14:00") == datetime(1, 1, 1, 14, tzinfo=UTC)


_OFFSETS = st.integers(-(24 * 60 - 1), 24 * 60 - 1).map(lambda m: timezone(timedelta(minutes=m)))


@pytest.fixture
def gen_engine(make_engine):
    """One engine for every generated example."""
    return make_engine("gen.db")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stamps=st.lists(st.datetimes(timezones=_OFFSETS), min_size=1, max_size=4))
def test_any_valid_timestamp_with_any_offset_never_fails_a_call(gen_engine, stamps):
    eng = gen_engine
    texts = [s.isoformat() for s in stamps]
    for text in texts:
        out = eng.store("gen", f"generated memory at {text}", timestamp=text)
        assert out["result"] in ("stored", "skipped"), out
    assert eng.archive_episode("gen", "generated session", history=[{"timestamp": t} for t in texts])["ok"] is True
    context = [{"role": "assistant", "content": f"reply at {t}", "timestamp": t} for t in texts]
    merged = eng.recall_with_context(RecallRequest(agent_id="gen", query="generated"), external_context=context)
    echoed = [parse_ts(m["timestamp"]) for m in merged["messages"] if m["content"].startswith("reply at")]
    assert echoed == sorted(echoed)
