"""Read connections of threads that have ended are closed: a server's worker threads are
replaced after idling, and each new thread opens its own reader (found by a break-it pass:
every burst of HTTP clients left ~40 more open connections behind)."""

from __future__ import annotations

import threading

from cpersona.storage.db import Database


def test_readers_of_ended_threads_are_closed(tmp_path):
    db = Database(str(tmp_path / "r.db"))
    try:
        for _burst in range(5):
            workers = [threading.Thread(target=lambda: db.reader().execute("SELECT 1").fetchone()) for _ in range(8)]
            for t in workers:
                t.start()
            for t in workers:
                t.join()
        db.reader()  # a new reader prunes the ended threads' ones
        assert len(db._readers) <= 9
    finally:
        db.close()

