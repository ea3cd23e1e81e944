"""Every stored text is findable by its words: short terms (CJK / Hangul words of two
characters, one-digit numbers), Unicode normal forms, invisible format characters.

Each named example failed before the word index (cpersona/util/words.py) existed; the
property tests generate texts in several scripts, normal forms and with format characters.
Embeddings are off, so only the keyword channel can find anything.
"""

from __future__ import annotations

import unicodedata

import pytest
from cpersona.service.requests import RecallRequest
from cpersona.util.words import is_function_kana, match_form, query_terms
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_mcp


def ranked(engine, agent: str, query: str, limit: int = 10) -> list[str]:
    """Contents best first (the response lists worst → best)."""
    return [m["content"] for m in reversed(engine.recall(RecallRequest(agent, query, limit))["messages"])]


def store_all(engine, agent: str, texts: list[str]) -> None:
    for text in texts:
        assert engine.store(agent, text)["result"] == "stored", text


FILLER = [f"weekly status note {i}: the build is green and the backlog shrinks" for i in range(30)]


@pytest.mark.parametrize("query, target", [
    ("广西 OR 桂林 OR 漓江", "去年夏天我们去了桂林，漓江的风景很美"),
    ("조선 역사", "조선의 역사는 오백 년 동안 이어졌다"),
    ("서울 날씨", "내일 서울의 날씨는 맑음"),
    ("设备 NAS", "设备清单：路由器和交换机"),
])
def test_two_character_words_are_found(engine_none, query, target):
    store_all(engine_none, "a", [*FILLER, target, "NAS backup runs nightly at 02:00"])
    assert target in ranked(engine_none, "a", query)


def test_short_cjk_word_ranks_its_row_first(engine_none):
    rows = ["漓江的风景很美", "今天的会议改到下午", "桂林米粉很好吃"]
    store_all(engine_none, "a", FILLER + rows)
    assert ranked(engine_none, "a", "漓江")[0] == "漓江的风景很美"


@pytest.mark.parametrize("query, best, others", [
    ("version 2", "release notes for version 2", ["release notes for version 1", "release notes for version 3"]),
    ("room 4", "room 4 is booked for the teams", ["room 12 is booked for the team", "room 40 is booked for the team"]),
])
def test_one_digit_terms_rank_their_row_first(engine_none, query, best, others):
    store_all(engine_none, "a", [*FILLER, *others, best])  # same length: bm25 of the trigram index ties
    assert ranked(engine_none, "a", query)[0] == best


NFD_TEXTS = ["Café crème brûlée at the Zürich office", "naïve Bayes beats the résumé filter",
             "서울에서 회의가 있다", "ガイドブックを買った", "Ελληνικά μαθήματα άρχισαν"]


@pytest.mark.parametrize("text", NFD_TEXTS)
def test_text_stored_in_nfd_is_found_by_nfc_words(engine_none, text):
    stored = unicodedata.normalize("NFD", text)
    store_all(engine_none, "a", [*FILLER, stored])
    word = max(text.split(), key=len)
    got = ranked(engine_none, "a", unicodedata.normalize("NFC", word))
    assert got and got[0] == stored  # what the user stored is returned unchanged


def test_nfc_and_nfd_twins_are_one_memory(engine_none):
    text = "Réunion à Genève, salle Mönch"
    first = engine_none.store("a", unicodedata.normalize("NFC", text))
    second = engine_none.store("a", unicodedata.normalize("NFD", text))
    assert first["result"] == "stored"
    assert second == {"ok": True, "result": "skipped", "reason": "duplicate content", "id": first["id"]}


def test_format_characters_are_ignored_for_matching(engine_none):
    store_all(engine_none, "a", [*FILLER, "my pass\u200bword hint is the colour of the sky"])
    assert ranked(engine_none, "a", "password")[0] == "my pass\u200bword hint is the colour of the sky"


@pytest.mark.parametrize("content", ["\u200b\u200b\u200b", "\u200b \ufeff\u2060", "[Memory from x] \u200d"])
def test_content_of_only_format_characters_is_rejected(engine_none, content):
    out = engine_none.store("a", content)
    assert out["ok"] is False and out["result"] == "rejected"
    assert "message.content" in out["reason"] and "empty" in out["reason"]
    assert engine_none.recall(RecallRequest("a", ""))["messages"] == []


def test_short_terms_through_mcp(tmp_path):
    async def scenario(client):
        for text in [*FILLER[:10], "去年夏天我们去了桂林", "pass\u200bword reset link"]:
            await client.call("store", {"agent_id": "a", "message": {"content": text}})
        one = await client.call("recall", {"agent_id": "a", "query": "广西 OR 桂林 OR 漓江"})
        two = await client.call("recall", {"agent_id": "a", "query": "password"})
        zw = await client.call("store", {"agent_id": "a", "message": {"content": "\u200b\u200b"}})
        return one.data, two.data, zw.data

    one, two, zw = run_mcp(scenario, tmp_path / "m.db", {"CPERSONA_EMBEDDING_MODE": "none"}).result
    assert one["messages"][-1]["content"] == "去年夏天我们去了桂林"
    assert two["messages"][-1]["content"] == "pass\u200bword reset link"
    assert zw["result"] == "rejected"


# ----------------------------------------------------------------- generated texts
ALPHABETS = {
    "latin": "abcdefghijklmnopqrstuvwxyzéèêëáàâäíïóöôúüûçñøåæœß",
    "cyrillic": "абвгдежзийклмнопрстуфхцчшщыэюя",
    "greek": "αβγδεζηθικλμνξοπρστυφχψωάέήίόύώ",
    "hangul": "".join(chr(c) for c in range(0xAC00, 0xAC00 + 400, 7)),
    "cjk": "漢字日本語中文学习设备桂林漓江天气会议时间地址电话服务器网络数据",
    "kana": "あいうえおかきくけこがぎぐげごさしすせそざじずぜぞアイウエオカキクケコガギグゲゴパピプペポ",
    "digits": "0123456789",
}
FORMAT = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"]


@st.composite
def texts(draw):
    """(stored text, the words it was made of): words of random scripts, in a random
    normal form, with format characters inserted inside words at random."""
    words = []
    for _ in range(draw(st.integers(1, 6))):
        alphabet = ALPHABETS[draw(st.sampled_from(sorted(ALPHABETS)))]
        words.append(draw(st.text(alphabet, min_size=1, max_size=8)))
    form = draw(st.sampled_from(["NFC", "NFD", "NFKC", "NFKD"]))
    stored = []
    for word in words:
        word = unicodedata.normalize(form, word)
        if len(word) > 1 and draw(st.booleans()):
            cut = draw(st.integers(1, len(word) - 1))
            word = word[:cut] + draw(st.sampled_from(FORMAT)) + word[cut:]
        stored.append(word)
    return " ".join(stored), words


@pytest.fixture(scope="module")
def shared_engine(tmp_path_factory):
    from conftest import new_engine

    engine = new_engine(tmp_path_factory.mktemp("find") / "find.db")
    yield engine
    engine.close()


_counter = iter(range(10**9))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts())
def test_generated_text_is_findable_by_itself_and_its_words(shared_engine, made):
    stored, words = made
    agent = f"g{next(_counter)}"  # one agent per example: isolation keeps the examples apart
    out = shared_engine.store(agent, stored)
    assert out["result"] == "stored"
    assert stored in ranked(shared_engine, agent, stored)
    for word in words:
        if query_terms(word):  # English function words alone are no query
            assert stored in ranked(shared_engine, agent, word), (word, match_form(stored))


# ------------------------------------------------ one word, one token, wherever it stands
@pytest.mark.parametrize("query, row", [
    ("search-indexerで何があった？", "the search indexer crashed"),  # Latin glued to a particle: stemmed alike
    ("onyx2-gatewayのembeddingは何？", "onyx2-gateway embedding model"),
    ("What happened on 2024-01-07?", "2024年1月7日にデプロイが失敗した"),  # one date token in both notations
    ("2024/1/7", "deploy failed on 2024-01-07"),
    ("ERR_DISK_9755", "ERR-DISK-9755 again"),
])
def test_a_query_word_gives_the_token_the_row_holds(query, row):
    from cpersona.util.words import word_tokens

    missing = [t for t in query_terms(query) if t not in word_tokens(row) and not is_function_kana(t)]
    shared = {"index", "20240107", "errdisk9755", "embed"} & set(query_terms(query))
    assert shared and not shared & set(missing), (query_terms(query), word_tokens(row))


def test_hiragana_function_words_are_no_query_terms_unless_nothing_else_is():
    assert [t for t in query_terms("2024年1月7日に何があった？") if is_function_kana(t)] == []
    assert query_terms("ありがとう") == ["あり", "りが", "がと", "とう"]  # nothing else: kept
    assert "があ" in word_tokens_of("何があった")  # the index keeps them (as it keeps "the")


def word_tokens_of(text: str) -> list[str]:
    from cpersona.util.words import word_tokens

    return word_tokens(text)



@pytest.mark.parametrize("query, terms", [
    ("who's on call?", ["call"]),  # no term `s` that every possessive in the store holds
    ("What is Caroline’s job?", ["carolin", "job"]),
    ("Why don't we use Kafka?", ["use", "kafka"]),
    ("I won't go; who won the race?", ["go", "won", "race"]),
    ("we've moved, they're here, I'd like it", ["move", "here", "like"]),
    ("vitamin D level", ["vitamin", "d", "level"]),  # a letter that is no clitic stays
])
def test_english_clitics_are_read_before_the_query_is_split(query, terms):
    assert query_terms(query) == terms


def test_who_is_on_call_finds_the_rota_not_a_possessive_that_was_called(make_engine):
    engine = make_engine(embedding_mode="none")
    store_all(engine, "a", ["Mira's dog is called Biscuit, a corgi.", "The on-call rotation changes every Monday."])
    assert ranked(engine, "a", "who's on call?")[0] == "The on-call rotation changes every Monday."
