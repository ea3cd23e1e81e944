"""Sharing the interpreter between the threads of one server process."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: CPUs this process may run on (its affinity mask where the OS has one).
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def yield_gil() -> None:
    """Let the process's other threads (recalls being served) run now. A long CPU-bound job
    (an import parsing 100k lines) otherwise keeps the interpreter lock for a whole switch
    interval each time, and a recall that needs it dozens of times waits that long each time."""
    time.sleep(0)


_gc_lock = threading.Lock()
_gc_holders = 0
_gc_paused_here: list[bool] = []


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a bulk job builds hundreds of thousands of
    rows (dicts and lists without cycles, freed by reference counting): every full
    collection would scan all of them with the interpreter lock held — 50 ms and more per
    pass at 100k rows — stalling the recalls other threads serve. Nested and concurrent
    uses are counted; collection resumes when the last one ends (and the process was
    collecting before)."""
    global _gc_holders
    with _gc_lock:
        _gc_holders += 1
        if _gc_holders == 1:
            _gc_paused_here.append(gc.isenabled())
            gc.disable()
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_paused_here.pop():
                gc.enable()

