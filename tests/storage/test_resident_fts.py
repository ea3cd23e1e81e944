"""storage/resident_fts.py and the two indexes it holds (resident_words.py,
resident_trigrams.py): an answer from memory is exactly FTS5's (the same rows, order and bm25
doubles), only at the file's current state; anything a snapshot cannot read goes to FTS5."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time

import pytest
from cpersona.service.requests import RecallRequest
from cpersona.storage import fts_instances, resident_fts, resident_trigrams, resident_words
from cpersona.storage.scope import Scope
from cpersona.util.text import match_expression
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import wait_until
from quality_helpers import make

#: Plain tokens of several scripts, a few very common; "zzz" and "無い" are in no row.
VOCAB = ["alpha", "beta", "gamma", "deploy", "k8s", "2024", "日本", "東京", "カタカナー", "ひらがな", "서울", "x"]
QUERY_VOCAB = [*VOCAB, "zzz", "無い"]
#: Text pieces for the trigram index: cased ASCII, identifiers, Japanese, punctuation, repeats.
PIECES = ["Deploy", "deploy", "ERR_TIMEOUT_42", "k8s", "aaaa", "aa", "日本語の", "エラー", "、", "-", "/src/x.py", " "]
PHRASES = ["deploy", "DEPLOY", "err_timeout", "aaa", "aaaa", "日本語", "エラー", "src/x", "k8s", "oy e", "zzz", "本語の"]


def table(kind, rows: list[tuple[int, str]], deleted: list[int]) -> sqlite3.Connection:
    tokenizer = "unicode61 remove_diacritics 0" if kind is resident_words else "trigram"
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute(f"CREATE VIRTUAL TABLE {kind.TABLE} USING fts5(body, tokenize='{tokenizer}')")
    conn.execute(f"CREATE VIRTUAL TABLE {kind.INSTANCES} USING fts5vocab(main, {kind.TABLE}, 'instance')")
    conn.execute(f"CREATE VIRTUAL TABLE {kind.TERMS} USING fts5vocab(main, {kind.TABLE}, 'row')")
    conn.executemany(f"INSERT INTO {kind.TABLE}(rowid, body) VALUES (?, ?)", rows)
    conn.executemany(f"DELETE FROM {kind.TABLE} WHERE rowid = ?", [(i,) for i in deleted])
    return conn


def fts5(conn: sqlite3.Connection, name: str, phrases: list[str], depth: int) -> list[tuple[int, float]]:
    return [tuple(r) for r in conn.execute(f"SELECT rowid, rank FROM {name} WHERE {name} MATCH ? "
                                           "ORDER BY +rank, rowid LIMIT ?", (match_expression(phrases), depth))]


def same_as_fts5(kind, bodies, deleted, phrases, depth):
    rows = [(i * 3 + 1, body) for i, body in enumerate(bodies)]  # gaps in the rowids
    conn = table(kind, rows, [i * 3 + 1 for i in deleted])
    snap = kind.build(conn)
    want = fts5(conn, kind.TABLE, phrases, depth)
    if snap is None:  # every row deleted, or no token at all
        assert want == []
        return
    assert snap.top(phrases, depth) == want  # the same doubles, not merely close ones
    assert resident_fts.agrees(conn, kind.TABLE, snap)


@settings(max_examples=60, deadline=None)
@given(bodies=st.lists(st.lists(st.sampled_from(VOCAB), max_size=12).map(" ".join), min_size=1, max_size=60),
       deleted=st.sets(st.integers(1, 60), max_size=10),
       phrases=st.lists(st.sampled_from(QUERY_VOCAB), min_size=1, max_size=6),
       depth=st.sampled_from([1, 3, 10, 40, 100]))
def test_the_word_postings_rank_exactly_as_fts5(bodies, deleted, phrases, depth):
    same_as_fts5(resident_words, bodies, deleted, phrases, depth)


@settings(max_examples=60, deadline=None)
@given(bodies=st.lists(st.lists(st.sampled_from(PIECES), max_size=10).map("".join), min_size=1, max_size=50),
       deleted=st.sets(st.integers(1, 50), max_size=8),
       phrases=st.lists(st.sampled_from(PHRASES), min_size=1, max_size=5),
       depth=st.sampled_from([1, 3, 10, 40]))
def test_the_trigram_places_rank_exactly_as_fts5(bodies, deleted, phrases, depth):
    same_as_fts5(resident_trigrams, bodies, deleted, phrases, depth)


@pytest.mark.parametrize("text, plain", [
    ("deploy", True), ("k8s", True), ("2024", True), ("日本", True), ("カタカナー", True), ("서울", True),
    ("Deploy", False), ("café", False), ("a-b", False), ("a_b", False), ("", False), ("ß", False), ("а", False),
    ("ᦂᦱ", False)])  # New Tai Lue: letters to Python, a separator inside to SQLite's older tables
def test_only_a_text_fts5_reads_as_itself_is_a_plain_word(text, plain):
    assert resident_words.plain_token(text) is plain


@pytest.mark.parametrize("phrase, folded", [
    ("Deploy-X", "deploy-x"), ("日本語、です", "日本語、です"), ("ERR_42", "err_42"), ("Café", None), ("ＡＢＣ", None)])
def test_a_trigram_phrase_is_read_only_when_its_folding_is_known(phrase, folded):
    assert resident_trigrams.fold(phrase) == folded


def test_a_build_that_disagrees_with_fts5_turns_that_index_off(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(resident_fts, "QUIET_S", 0.01)
    monkeypatch.setattr(resident_fts, "agrees", lambda conn, name, snap: name != resident_words.TABLE)
    eng = make(tmp_path / "off.db", embedder=None)
    try:
        eng.store("a", "deploy the billing service")
        held = eng.db.resident_fts
        words, trigrams = match_expression(["deploy"]), match_expression(["billing"])
        with caplog.at_level(logging.WARNING, logger=resident_fts.__name__):
            assert held.top(resident_words.TABLE, words, 10) is None  # not built yet: FTS5 answers
            assert wait_until(lambda: held.top(resident_trigrams.TABLE, trigrams, 10) is not None)
        assert held.top(resident_words.TABLE, words, 10) is None and resident_words.TABLE in held.disabled
        assert "ranked differently from FTS5" in caplog.text
        assert eng.recall(RecallRequest("a", "deploy"))["messages"]  # FTS5 still answers
    finally:
        eng.close()


def test_recall_uses_the_snapshots_only_at_the_files_current_state(tmp_path, monkeypatch):
    monkeypatch.setattr(resident_fts, "QUIET_S", 0.01)
    eng = make(tmp_path / "fresh.db", embedder=None)
    try:
        first = eng.store("a", "we deploy the billing service on fridays")["id"]
        held = eng.db.resident_fts
        expr = match_expression(["deploy", "billing"])
        assert wait_until(lambda: held.top(resident_words.TABLE, expr, 10) is not None)  # asking starts the build
        with eng.db.read() as s:
            assert [r.id for r, _ in s.search.memories_words(expr, Scope("a"), "", 10)] == [first]
            assert [r.id for r, _ in s.search.memories_fts(expr, Scope("a"), "", 10)] == [first]
        second = eng.store("a", "billing deploy billing deploy runbook")["id"]
        assert held.top(resident_words.TABLE, expr, 10) is None  # the file changed: FTS5 answers until the rebuild
        ids = [m["ref"] for m in eng.recall(RecallRequest("a", "deploy billing"))["messages"]]
        assert f"mem:{second}" in ids
        for name in (resident_words.TABLE, resident_trigrams.TABLE):
            assert wait_until(lambda name=name: (held.top(name, expr, 10) or [(0, 0)])[0][0] == second)
        assert held.top("episodes_fts", expr, 10) is None  # not held
    finally:
        eng.close()
    assert held._thread is not None and not held._thread.is_alive()  # closing ends the builder


def test_a_store_whose_most_frequent_words_it_cannot_read_stays_held():
    """Words the snapshot does not read (Cyrillic: FTS5 folds case) are no check of it."""
    rows = [(i, "привет мир друг " + ("deploy" if i % 3 == 0 else "billing")) for i in range(1, 40)]
    for kind in (resident_words, resident_trigrams):
        conn = table(kind, rows, [])
        snap = kind.build(conn)
        assert snap is not None and snap.checks() and resident_fts.agrees(conn, kind.TABLE, snap)
        assert snap.top(["привет"], 5) is None  # asked of FTS5
        assert snap.top(["deploy"], 5) == fts5(conn, kind.TABLE, ["deploy"], 5)


def test_a_table_of_long_rows_is_left_to_fts5(monkeypatch):
    """The bound is on what a build reads (tokens), not only on rows: 10 rows of 16,000
    characters are 160,000 trigrams."""
    conn = table(resident_trigrams, [(i, "x" * 16000) for i in range(1, 11)], [])
    assert resident_trigrams.build(conn) is not None
    monkeypatch.setattr(resident_trigrams, "MAX_TOKENS", 100_000)
    assert resident_trigrams.build(conn) is None


def test_a_build_the_file_changed_under_doubles_the_quiet_spell(tmp_path, monkeypatch):
    monkeypatch.setattr(resident_fts, "QUIET_S", 0.01)
    eng = make(tmp_path / "busy.db", embedder=None)
    try:
        eng.store("a", "deploy the billing service")
        held = eng.db.resident_fts
        real = held.builders[resident_words.TABLE]
        writes = iter(range(1))

        def build_while_storing(conn):
            for i in writes:  # the first build only: another write lands while it reads
                eng.store("a", f"a store during the build {i}")
            return real(conn)

        held.builders[resident_words.TABLE] = build_while_storing
        expr = match_expression(["deploy"])
        assert wait_until(lambda: held.top(resident_words.TABLE, expr, 10) is None and held._quiet == 0.02)
        assert wait_until(lambda: held.top(resident_words.TABLE, expr, 10) is not None)  # the next build holds
        assert held._quiet == 0.01  # an answer from memory: back to the short spell
    finally:
        eng.close()


def test_a_token_fts5_cut_inside_a_character_is_read():
    """FTS5 cuts a token at 32,768 bytes, here inside a 3-byte Thai letter: its vocabulary then
    holds text that is not UTF-8, which a build must read rather than fail on every time."""
    conn = table(resident_words, [(1, "ก" * 11000), (2, "deploy billing"), (3, "deploy")], [])
    snap = resident_words.build(conn)
    assert snap is not None and snap.top(["deploy"], 5) == fts5(conn, resident_words.TABLE, ["deploy"], 5)


@pytest.mark.parametrize("kind", [resident_words, resident_trigrams])
def test_a_build_read_in_many_term_ranges_ranks_as_fts5(kind, monkeypatch):
    """A build reads the instances a term range at a time (CHUNK each); with ranges of a few
    instances, bounds fall on every kind of term — a cut token (not UTF-8) never bounds one."""
    monkeypatch.setattr(fts_instances, "CHUNK", 3)
    rows = [(i * 2 + 1, " ".join(VOCAB[(i * k) % len(VOCAB)] for k in range(1, 6))) for i in range(40)]
    conn = table(kind, [*rows, (200, "ก" * 11000 + " deploy")], [])
    snap = kind.build(conn)
    assert snap is not None and resident_fts.agrees(conn, kind.TABLE, snap)
    for phrases in (["deploy"], ["alpha", "カタカナー"], ["gamma", "2024", "ひらがな"], ["beta"]):
        assert snap.top(phrases, 10) == fts5(conn, kind.TABLE, phrases, 10)


@pytest.mark.parametrize("kind", [resident_words, resident_trigrams])
def test_sparse_rowids_are_placed_by_search(kind):
    """Rowids far above the row count (an import that kept large ids) are placed by a binary
    search, not by an array as long as the largest rowid."""
    conn = table(kind, [(5, "deploy alpha"), (10**12, "deploy beta"), (2 * 10**12, "alpha")], [])
    check_rowids(kind, conn)


@pytest.mark.parametrize("kind", [resident_words, resident_trigrams])
def test_negative_rowids_are_placed_by_search(kind):
    """SQLite allows negative rowids (a row inserted with id -5): never an array index."""
    check_rowids(kind, table(kind, [(-7, "deploy alpha"), (-2, "alpha beta"), (3, "deploy"), (4, "beta")], []))


def check_rowids(kind, conn):
    snap = kind.build(conn)
    assert snap is not None
    for phrases in (["deploy"], ["alpha"], ["beta", "alpha"]):
        assert snap.top(phrases, 10) == fts5(conn, kind.TABLE, phrases, 10)


def test_a_build_that_reads_other_instances_than_counted_fails():
    """The 'row' table's counts and the 'instance' rows read must agree, or the build fails
    (recall asks FTS5) rather than holding terms over the wrong places."""
    conn = table(resident_words, [(1, "alpha beta"), (2, "beta")], [])
    conn.execute(f"DROP TABLE {resident_words.TERMS}")  # counts of another state of the index
    conn.execute(f"CREATE TABLE {resident_words.TERMS} AS SELECT 'alpha' AS term, 1 AS cnt UNION ALL SELECT 'beta', 3")
    with pytest.raises(RuntimeError, match="instances read"):
        resident_words.build(conn)


def test_a_failed_build_doubles_the_quiet_spell_and_leaves_the_other_index_held(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(resident_fts, "QUIET_S", 0.01)
    eng = make(tmp_path / "fail.db", embedder=None)
    try:
        eng.store("a", "deploy the billing service")
        held = eng.db.resident_fts

        def broken(conn):
            raise sqlite3.OperationalError("Could not decode to UTF-8 column 'term'")

        held.builders[resident_words.TABLE] = broken
        expr = match_expression(["deploy"])
        with caplog.at_level(logging.WARNING, logger=resident_fts.__name__):
            assert wait_until(lambda: held.top(resident_words.TABLE, expr, 10) is None and held._quiet >= 0.02)
            assert wait_until(lambda: held.top(resident_trigrams.TABLE, expr, 10) is not None)
        assert "next try after" in caplog.text
    finally:
        eng.close()


def test_closing_interrupts_a_build(tmp_path, monkeypatch):
    """Closing while a build reads (a 100k-row store reads for seconds) stops it at once."""
    monkeypatch.setattr(resident_fts, "QUIET_S", 0.01)
    eng = make(tmp_path / "close.db", embedder=None)
    reading = threading.Event()

    def endless(conn):
        reading.set()
        conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n").fetchone()

    try:
        eng.store("a", "deploy the billing service")
        held = eng.db.resident_fts
        held.builders[resident_words.TABLE] = endless
        expr = match_expression(["deploy"])
        assert wait_until(lambda: held.top(resident_words.TABLE, expr, 10) is None and reading.is_set())
    finally:
        started = time.monotonic()
        eng.close()
    assert time.monotonic() - started < 5 and not held._thread.is_alive()


def test_a_query_word_longer_than_fts5_reads_goes_to_fts5():
    """FTS5 cuts a token at 32,768 bytes, a query's too (NFKC makes `ⅷ` × 9,000 a 36,000-letter
    word within the query limit): the snapshot does not hold the cut form, so FTS5 answers."""
    conn = table(resident_words, [(1, "v" * 40000), (2, "deploy")], [])
    snap = resident_words.build(conn)
    assert snap is not None and snap.top(["v" * 40000], 5) is None and snap.top(["deploy"], 5) is not None


def test_a_word_index_of_too_many_distinct_terms_is_left_to_fts5(monkeypatch):
    """Held memory follows distinct terms too (a Python string each): bounded by MAX_TERMS."""
    conn = table(resident_words, [(1, "alpha beta gamma"), (2, "delta")], [])
    monkeypatch.setattr(resident_words, "MAX_TERMS", 3)
    assert resident_words.build(conn) is None
    monkeypatch.setattr(resident_words, "MAX_TERMS", 4)
    assert resident_words.build(conn) is not None


def test_a_code_point_above_unicode_in_stored_bytes_does_not_fail_the_build(monkeypatch):
    """Bytes another program wrote (F4 90 80 80: 0x110000) are a term FTS5 holds; Python has no
    such character, so the term is never read nor used to bound a range."""
    monkeypatch.setattr(fts_instances, "CHUNK", 1)
    conn = table(resident_trigrams, [(1, "deploy now"), (2, "deploy later")], [])
    conn.execute(f"INSERT INTO {resident_trigrams.TABLE}(rowid, body) VALUES (3, CAST(? AS TEXT))",
                 (b"ab" + b"\xf4\x90\x80\x80" * 40 + b" deploy",))
    snap = resident_trigrams.build(conn)
    assert snap is not None and snap.checks() and resident_fts.agrees(conn, resident_trigrams.TABLE, snap)
    assert snap.top(["deploy"], 5) == fts5(conn, resident_trigrams.TABLE, ["deploy"], 5)


def test_a_store_never_written_builds_quietly(tmp_path, monkeypatch, caplog):
    """A new store's FTS5 tables have an empty averages record: nothing to hold, no warning."""
    monkeypatch.setattr(resident_fts, "QUIET_S", 0.01)
    eng = make(tmp_path / "new.db", embedder=None)
    try:
        held = eng.db.resident_fts
        with caplog.at_level(logging.WARNING, logger=resident_fts.__name__):
            for _ in range(4):
                eng.recall(RecallRequest("a", "deploy", 5))
            assert wait_until(lambda: held._held is not None)
        assert "not held" not in caplog.text and held._quiet == 0.01
    finally:
        eng.close()
