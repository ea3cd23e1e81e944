"""An empty recall that held matching rows back says so and how to widen it (found by a new
user: natural questions about a 3-row store came back empty with no hint)."""

from __future__ import annotations

from cpersona.retrieval import lexical
from cpersona.retrieval.candidate import EPISODE, Candidate
from cpersona.service.answers import NO_MATCH_NOTE, NO_WORD_MATCH_NOTE
from cpersona.service.requests import RecallRequest


def test_an_empty_answer_names_the_rows_it_held_back(engine_none):
    for text in ("my favourite editor is Helix", "Deploys go out on Thursdays after the 14:00 review.",
                 "The staging database moved to port 5433"):
        engine_none.store("me", text)
    empty = engine_none.recall(RecallRequest("me", "which weekday do releases and deploys usually happen?", 5))
    assert empty["messages"] == [] and empty["withheld"]["rows"] == 1 and "deep=true" in empty["withheld"]["fix"]
    deep = engine_none.recall(RecallRequest("me", "which weekday do releases and deploys usually happen?", 5,
                                            deep=True))
    assert "fix" not in deep.get("withheld", {})
    found = engine_none.recall(RecallRequest("me", "staging database port", 5))
    assert found["messages"] and "withheld" not in found
    nothing = engine_none.recall(RecallRequest("me", "zebra crossing", 5))
    assert nothing["messages"] == [] and "withheld" not in nothing  # nothing matched at all: said so
    assert nothing["note"] == NO_WORD_MATCH_NOTE  # no embeddings here: meaning was not searched


def test_an_agent_without_rows_is_named_rather_than_answered_empty(engine_none):
    engine_none.store("dev", "Deploys go out on Thursdays")
    typo = engine_none.recall(RecallRequest("Dev", "when do deploys happen?", 5))
    assert typo["messages"] == [] and typo["note"] == "agent 'Dev' has no memories or episodes in this scope"
    assert engine_none.recall(RecallRequest("dev", "zebra crossing", 5))["note"] == NO_WORD_MATCH_NOTE  # it exists
    assert "has no memories" in engine_none.recall(RecallRequest("Dev", "", 5))["note"]  # a blank query too
    assert "note" not in engine_none.recall(RecallRequest("dev", "deploys", 5))


def test_a_profile_does_not_answer_alone(engine_none):
    """From 50 rows on, the agent's profile is appended to a recall's rows; when no row
    answers (every match held back by the gate, or nothing matched) the answer is empty —
    the profile is not about the question (found by a new user: it came back alone)."""
    for i in range(50):
        engine_none.store("p", f"Service number {i} runs on host node-{i} and is owned by team {i % 5}.")
    engine_none.store("p", "The payroll export runs nightly at 02:00.")
    engine_none.update_profile("p", "Prefers short answers.")
    for question in ("Do we use Kubernetes?", "which service do the customers complain about most?"):
        assert engine_none.recall(RecallRequest("p", question, 3))["messages"] == [], question
    answered = engine_none.recall(RecallRequest("p", "when does the payroll export run?", 10))
    assert answered["messages"][-1]["content"].startswith("The payroll export")
    assert any(m["content"].startswith("[Profile]") for m in answered["messages"])


def test_an_episode_matching_a_fragment_of_a_word_is_no_perfect_keyword_match():
    """The episode keyword channel is scored like the memory one (relative bm25 × word
    coverage): its best hit no longer counts as a perfect match when it holds the query's
    words only as fragments (`key` inside `allkeys-lru`; found by a new user, whose four
    archived episodes took the best slot of unrelated questions)."""
    wq = lexical.WordQuery(("jira", "project", "key"), {"jira": 2.0, "project": 1.0, "key": 1.0})
    fragment = Candidate(EPISODE, 1, "[Episode] Session: set maxmemory-policy allkeys-lru")
    holder = Candidate(EPISODE, 2, "[Episode] Session: renamed the Jira project key to LDG")
    fragment.bm25, holder.bm25 = -4.0, -2.0  # the fragment has the best trigram bm25
    lexical.score_episodes([fragment, holder], wq)
    assert fragment.coverage == 0.0 and fragment.lexical == 0.5
    assert holder.coverage == 1.0 and holder.lexical == 0.5


def test_nothing_matched_is_said_only_when_nothing_was_left_out_on_request(engine_http):
    engine_http.store("me", "I drink coffee every morning")
    excluded = engine_http.recall(RecallRequest("me", "coffee", 5, exclude_contents=("I drink coffee every morning",)))
    assert excluded["messages"] == [] and "note" not in excluded  # a row matched: left out on request
    context = engine_http.recall_with_context(RecallRequest("me", "coffee", 5), external_context=[
        {"role": "user", "content": "I drink coffee every morning"}])
    assert context["messages"] and "note" not in context
    nothing = engine_http.recall(RecallRequest("me", "zebra crossing", 5))
    if not nothing["messages"] and "withheld" not in nothing:
        assert nothing["note"] == NO_MATCH_NOTE  # with a query vector: words and meaning were searched
