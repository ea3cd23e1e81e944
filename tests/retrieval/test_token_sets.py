"""Token sets of stored rows read from the word index's stored form (retrieval/lexical.py
`learn`, storage/search.py `word_forms`): the same sets tokenising the text gives."""

from __future__ import annotations

import json

from cpersona.retrieval import lexical
from cpersona.retrieval.recall_context import RecallRequest
from cpersona.util.lru import LRU
from cpersona.util.words import word_token_set
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import db_rows

TEXTS = [
    "The deploy runs on Thursday evenings.",
    "2023年10月11日にsession-cache v1.11.20を本番リリース。エラー率は0.1%未満で推移。",
    "update 2024-01-02: aurora-jp-worker migrated ERR_DISK_9755 from redis to postgresql.",
    "ＮＡＳ２ の ﬁle\u200bname — café naïve résumé, 서울 广西 雨",
    "emoji 🎉 and symbols ©®™ only… “quoted” text",
    "!!!",
]


def _forms(eng, ids: list[int]) -> dict[str, str]:
    with eng.db.read() as s:
        return s.search.word_forms(ids)


def test_stored_forms_split_into_the_tokens_of_the_text(engine_none):
    ids = [engine_none.store("kai", text)["id"] for text in TEXTS]
    forms = _forms(engine_none, ids)
    assert set(forms) == set(TEXTS)
    for text, form in forms.items():
        assert frozenset(form.split()) == word_token_set(text), text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=80))
def test_any_stored_text_gives_the_same_tokens_from_its_form(engine_none, text):
    stored = engine_none.store("prop", text)
    if not stored.get("ok", True) or "id" not in stored:
        return  # refused (blank, invisible only): nothing stored
    forms = _forms(engine_none, [stored["id"]])
    for content, form in forms.items():
        assert frozenset(form.split()) == word_token_set(content)


def test_a_row_without_a_stored_form_is_left_to_tokenising(engine_none):
    first = engine_none.store("kai", "alpha beta")["id"]
    second = engine_none.store("kai", "gamma delta")["id"]
    with engine_none.db.write() as s:
        s.conn.execute("DELETE FROM memories_words WHERE rowid = ?", (second,))
    assert _forms(engine_none, [first, second]) == {"alpha beta": "alpha beta"}


def test_forms_follow_an_update_of_the_text(engine_none):
    mid = engine_none.store("kai", "the old text about deploys")["id"]
    engine_none.update_memory(mid, "the new text about lunches", "kai")
    assert _forms(engine_none, [mid]) == {"the new text about lunches": "the new text about lunch"}


def test_recall_answers_alike_from_stored_forms_and_from_tokenising(engine_http, monkeypatch):
    for text in [*TEXTS[:3], "deploys need two reviews", "the deploy window is thursday"]:
        engine_http.store("kai", text)
    queries = ["when is the deploy?", "session-cache リリース", "ERR_DISK_9755", "who migrated redis?"]

    def answers() -> list[str]:
        lexical.TOKEN_SETS.clear()
        return [json.dumps(engine_http.recall(RecallRequest("kai", q, 5), verbose=True)["messages"],
                           sort_keys=True) for q in queries]

    learned = answers()
    assert lexical.TOKEN_SETS.missing(TEXTS[:3]) == []  # read from the forms
    with monkeypatch.context() as m:
        from cpersona.storage.search import SearchRepo

        m.setattr(SearchRepo, "word_forms", lambda self, ids: {})
        tokenised = answers()
    assert learned == tokenised


def test_token_sets_keep_the_most_recent():
    sets: LRU[str, frozenset[str]] = LRU(2)
    sets.put("a", frozenset({"a"}))
    sets.put("b", frozenset({"b"}))
    assert sets.get("a") == frozenset({"a"})  # a is now the most recent
    sets.put("c", frozenset({"c"}))
    assert sets.missing(["a", "b", "c"]) == ["b"] and len(sets) == 2
    assert lexical.token_set("b c") == word_token_set("b c")  # a miss is tokenised


def test_forms_are_keyed_by_the_text_read_with_them(engine_none):
    mid = engine_none.store("kai", "alpha")["id"]
    assert db_rows(engine_none.db.path, "SELECT body FROM memories_words WHERE rowid = ?", (mid,)) == [("alpha",)]
    assert _forms(engine_none, [mid, 999_999]) == {"alpha": "alpha"}
