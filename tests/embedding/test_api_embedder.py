"""The `api` embedding mode: an OpenAI-compatible endpoint with a key; vectors normalised
here; the key never in an error or a log line; store → recall through the engine."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from cpersona.config import Settings
from cpersona.devtools.fake_embed import FakeEmbedServer, fake_vector
from cpersona.embedding.api import ApiEmbedder
from cpersona.embedding.provider import build_embedder
from cpersona.errors import ConfigError, EmbeddingError

KEY = "sk-test-0123456789abcdefSECRET"


@pytest.fixture(scope="module")
def api_server():
    server = FakeEmbedServer(dim=64, api_key=KEY).start()
    yield server
    server.stop()


def test_vectors_come_back_in_input_order_and_normalised(api_server):
    emb = ApiEmbedder(api_server.api_url, KEY, "text-embedding-3-small")
    try:
        texts = ["alpha beta", "gamma delta", "東京の天気"]
        vectors = emb.embed(texts)
    finally:
        emb.close()
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    for text, row in zip(texts, vectors):
        assert np.allclose(row, fake_vector(text, 64), atol=1e-5)
    headers = api_server.api_headers[-1]
    assert headers["authorization"] == f"Bearer {KEY}"
    assert emb.model_id == "text-embedding-3-small" and emb.dim == 64


def test_wrong_key_error_never_contains_a_key(api_server, caplog):
    wrong = "sk-wrong-key-abcdef0123456789"
    emb = ApiEmbedder(api_server.api_url, wrong, "m")
    try:
        with caplog.at_level(logging.DEBUG), pytest.raises(EmbeddingError) as err:
            emb.embed(["x"])
    finally:
        emb.close()
    text = str(err.value)
    assert "HTTP 401" in text and "invalid_api_key" in text
    assert wrong not in text and KEY not in text and wrong not in caplog.text
    assert wrong not in repr(emb)


def test_unreachable_endpoint_error_names_the_url_not_the_key():
    emb = ApiEmbedder("http://127.0.0.1:9/v1/embeddings", KEY, "m", timeout=2)
    try:
        with pytest.raises(EmbeddingError) as err:
            emb.embed(["x"])
    finally:
        emb.close()
    assert "127.0.0.1:9" in str(err.value) and KEY not in str(err.value)


def test_settings_for_api_mode(api_server):
    settings = Settings.from_env({"CPERSONA_EMBEDDING_MODE": "api", "EMBEDDING_API_URL": api_server.api_url,
                                  "EMBEDDING_API_KEY": KEY, "EMBEDDING_MODEL": "my-model"})
    assert KEY not in repr(settings)
    emb = build_embedder(settings)
    try:
        assert emb is not None and emb.mode == "api" and emb.model_id == "my-model"
    finally:
        emb.close()


@pytest.mark.parametrize(("env", "needle"), [
    ({"CPERSONA_EMBEDDING_MODE": "api"}, "needs CPERSONA_EMBEDDING_API_KEY"),
    ({"CPERSONA_EMBEDDING_MODE": "api", "CPERSONA_EMBEDDING_API_KEY": KEY + "\n"}, "nothing is trimmed"),
])
def test_api_mode_misconfiguration_is_a_config_error_without_the_key(env, needle):
    with pytest.raises(ConfigError) as err:
        build_embedder(Settings.from_env(env))
    assert needle in str(err.value) and KEY not in str(err.value)


def test_store_and_recall_in_api_mode(make_engine, api_server):
    engine = make_engine(embedding_mode="api", embedding_api_url=api_server.api_url, embedding_api_key=KEY)
    stored = engine.store("a", "the staging cluster runs in Frankfurt")
    assert stored["result"] == "stored" and stored["embedded"] is True
    from cpersona.service.requests import RecallRequest

    found = engine.recall(RecallRequest(agent_id="a", query="staging cluster Frankfurt"))
    assert found["messages"][-1]["content"] == "the staging cluster runs in Frankfurt"
    assert "advisory" not in found
