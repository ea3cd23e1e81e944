"""Sharing the interpreter between the threads of one server process."""

from __future__ import annotations

import time


def yield_gil() -> None:
    """Let the process's other threads (recalls being served) run now. A long CPU-bound job
    (an import parsing 100k lines) otherwise keeps the interpreter lock for a whole switch
    interval each time, and a recall that needs it dozens of times waits that long each time."""
    time.sleep(0)
