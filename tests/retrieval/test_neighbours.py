"""Neighbour turns (retrieval/neighbours.py): a weak row next to a strong one in its
conversation rises to w × the strong row's score; strong rows keep their order."""

from __future__ import annotations

import numpy as np
import pytest
from cpersona.index.vector_index import VectorIndex
from cpersona.retrieval import neighbours
from cpersona.service.requests import RecallRequest
from cpersona.storage.scope import Scope

DIM = 8
QUESTION = "Melanie: Which book has been your favourite guide lately?"
ANSWER = "Caroline: I loved Becoming Nicole by Amy Ellis Nutt, a true story."
FILLER = [f"{who}: we talked about {topic} at length today" for who, topic in
          [("Melanie", "pottery"), ("Caroline", "hiking"), ("Melanie", "camping"), ("Caroline", "painting"),
           ("Melanie", "swimming"), ("Caroline", "the adoption agency"), ("Melanie", "music"),
           ("Caroline", "a support group")]]


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


def test_index_neighbours_follow_time_order_agent_and_scope():
    index = VectorIndex(DIM)
    # added out of order: the neighbours follow (created_at, id), not insertion
    for row_id, stamp in [(3, "2025-01-03"), (1, "2025-01-01"), (5, "2025-01-05"), (2, "2025-01-02")]:
        index.add(row_id, "a", "", "", stamp, _vec(row_id))
    index.add(4, "a", "other-project", "", "2025-01-04", _vec(4))
    index.add(9, "b", "", "", "2025-01-03T12", _vec(9))  # another agent, between a's rows in time
    got = index.neighbours([1, 3, 5, 9, 77], Scope("a"))
    assert got == {1: (2,), 3: (2, 4), 5: (4,), 9: ()}
    scoped = index.neighbours([3, 5], Scope("a", "p"))  # project p sees '' rows, not other-project's
    assert scoped == {3: (2, 5), 5: (3,)}


def test_index_neighbours_stay_inside_one_session():
    """Rows stored more than the session gap apart are not turns of one conversation."""
    index = VectorIndex(DIM)
    for row_id, stamp in [(1, "2025-01-01 09:00:00"), (2, "2025-01-01 09:10:00"), (3, "2025-01-02 09:00:00"),
                          (4, "2025-01-02T09:05:00+00:00")]:
        index.add(row_id, "a", "", "", stamp, _vec(row_id))
    assert index.neighbours([2, 3], Scope("a")) == {2: (1, 3), 3: (2, 4)}
    assert index.neighbours([2, 3], Scope("a"), max_gap_s=1800) == {2: (1,), 3: (4,)}


@pytest.mark.parametrize(("setting", "alpha", "expected"),
                         [(None, 0.1, 0.8), (None, 0.38, 0.24), (None, 0.6, 0.0), (0.3, 0.1, 0.3), (0.0, 0.1, 0.0)])
def test_weight_is_the_setting_or_one_minus_twice_alpha(setting, alpha, expected):
    assert neighbours.weight(setting, alpha) == pytest.approx(expected)


def _conversation(http_engine_factory, weight, name):
    engine = http_engine_factory(name, neighbour_weight=weight, gate_enabled=False, cc_alpha=0.2)
    for text in [*FILLER[:4], QUESTION, ANSWER, *FILLER[4:]]:
        assert engine.store("a", text)["result"] == "stored"
    return engine


def _recall(engine, query, **kw):
    res = engine.recall(RecallRequest("a", query, 5, **kw), verbose=True)
    return [m["content"] for m in reversed(res["messages"])], {m["content"]: m for m in res["messages"]}


def test_the_turn_after_a_matching_question_is_returned_with_a_neighbour_weight(http_engine_factory):
    query = "Which book has been her favourite guide?"
    off, _ = _recall(_conversation(http_engine_factory, 0.0, "off.db"), query)
    on, rows = _recall(_conversation(http_engine_factory, 0.9, "on.db"), query)
    assert off[0] == QUESTION and ANSWER not in off  # the answer shares no word with the question
    assert on[0] == QUESTION and set(on[1:3]) == {FILLER[3], ANSWER}  # the turns before and after it
    reason = rows[ANSWER]["match_reason"]
    assert reason["retrievers"] == [neighbours.CHANNEL]
    assert reason["cc"] == pytest.approx(0.9 * rows[QUESTION]["match_reason"]["cc"], abs=1e-4)


def test_fetched_neighbours_respect_the_exclusions(http_engine_factory):
    engine = _conversation(http_engine_factory, 0.9, "x.db")
    rows, _ = _recall(engine, "Which book has been her favourite guide?", exclude_contents=(ANSWER,))
    assert rows[0] == QUESTION and ANSWER not in rows


def test_strong_rows_keep_their_order(http_engine_factory):
    """A row never loses score and two matching neighbours do not lift each other above
    a better row elsewhere."""
    query = "pottery hiking camping"
    off, off_rows = _recall(_conversation(http_engine_factory, 0.0, "o.db"), query)
    on, on_rows = _recall(_conversation(http_engine_factory, 0.9, "n.db"), query)
    matched = [r for r in off if off_rows[r]["match_reason"].get("lexical")]
    assert [r for r in on if r in matched] == matched
    for r in matched:
        assert on_rows[r]["match_reason"]["cc"] >= off_rows[r]["match_reason"]["cc"]


def test_a_borrowing_row_never_outranks_the_row_it_borrowed_from(http_engine_factory):
    """Lending runs after the episode boundary penalty: a row stored after the latest episode
    borrows w × its neighbour's penalised score (it rose above that neighbour before: found
    by a new user whose unrelated fact, stored just after an archive, became the best match)."""
    engine = http_engine_factory("ep.db", neighbour_weight=0.9, gate_enabled=False, cc_alpha=0.2)
    old = "2025-01-01T09:00:00Z"  # the question turn's own time: days before the episode (penalty × 0.5)
    for text in FILLER[:4]:
        assert engine.store("a", text, timestamp=old)["result"] == "stored"
    assert engine.store("a", QUESTION, timestamp=old)["result"] == "stored"
    assert engine.archive_episode("a", "a session about pottery and hiking")["ok"]
    for text in [ANSWER, *FILLER[4:]]:
        assert engine.store("a", text)["result"] == "stored"
    rows, by_text = _recall(engine, "Which book has been her favourite guide?")
    assert rows.index(QUESTION) < rows.index(ANSWER), rows
    lender = by_text[QUESTION]["match_reason"]["cc"]
    assert by_text[ANSWER]["match_reason"]["cc"] == pytest.approx(0.9 * lender, abs=1e-4)


FACTS = ["Project Hoshi is the new payments platform of the company.",
         "The on-call rotation changes every Monday at 10:00.",
         "Feature flags are managed in LaunchDarkly.",
         "The web project serves its static assets through the CloudFront CDN, distribution E2ABCDEF, "
         "with cache rules per path and access logs in an S3 bucket.",
         "Datadog keeps our logs for seven days.",
         "The settlement batch runs daily at 02:00."]


def test_only_a_row_that_could_answer_lends(http_engine_factory):
    """A row that shares a common word with the question (`project`) is no turn that
    matches: on a store of facts written one after another its neighbours stay where their
    own evidence puts them (a new user saw them outrank the answer)."""
    engine = http_engine_factory("facts.db", neighbour_weight=0.9, gate_enabled=False)  # every scored row shows
    filler = [f"Team {i} meets on day {i % 7} in room R{i}." for i in range(60)]
    for text in [*filler[:30], *FACTS, *filler[30:]]:
        assert engine.store("a", text)["result"] == "stored"
    rows, by_text = _recall(engine, "What is Project Hoshi?")
    assert rows[0] == FACTS[0], rows
    cc = {text: by_text[text]["match_reason"]["cc"] for text in FACTS if text in by_text}
    assert cc[FACTS[1]] == pytest.approx(0.9 * cc[FACTS[0]], abs=1e-4)  # beside the answer: lent
    for text in (FACTS[2], FACTS[4]):  # beside the `project`-only row: their own score only
        assert cc.get(text, 0.0) < 0.9 * cc[FACTS[3]] - 1e-3, (text, cc)
