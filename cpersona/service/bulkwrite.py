"""Large writes (import, merge) as many short transactions that still act as one.

`BulkRun` writes its rows in chunks of at most CHUNK_SECONDS each, so the write lock is
released many times a second: recall (which briefly takes the lock to notice other
processes' commits), the MCP write tools and the task queue are never held up for long,
and another process's store never hits its busy timeout. Atomicity comes from the
bulk-write journal (`storage/journal.py`): each chunk notes its effects in the same
transaction, the commit point is one statement, and

* a defect found while writing (the disk filled, a constraint) undoes every chunk written
  so far before the call returns — nothing of the operation stays;
* a process killed mid-way leaves its operation in phase `writing`: the next process that
  opens the file for a bulk write, or the server at its start, undoes it (`recover`) once
  the writer's process is known to be gone; a move past its commit point is rolled forward.

Rows of an operation in progress are visible to concurrent reads (they are committed
chunks); they disappear again only if the operation fails — except a row that a write from
outside the operation changed or vouched for meanwhile (update, lock, a store answered
"already stored", a profile update): that write `claimed` it, and an undo keeps it. A write
to a row that a move is about to delete is refused instead (the copy was already taken).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from cpersona.errors import Refused
from cpersona.storage import Database, Session
from cpersona.util.files import pid_alive
from cpersona.util.threads import yield_gil

log = logging.getLogger(__name__)

#: Longest time one chunk keeps the write lock, in seconds.
CHUNK_SECONDS = 0.02
#: WAL size past which a bulk write empties the WAL between two chunks (see
#: `Database.checkpoint`): bounds the file's growth while recalls read all the time.
WAL_CHECKPOINT_BYTES = 32 * 1024 * 1024
#: Journal rows undone, rolled forward or forgotten per transaction.
JOURNAL_CHUNK = 200
#: This process's mark on the operations it journals: host, pid and a per-process token
#: (a later process that reuses the pid is not taken for this one).
OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"

T = TypeVar("T")
#: Called with the (table, id) of rows an undo or a roll-forward removed.
Removed = Callable[[list[tuple[str, int]]], None]


def _owner_gone(owner: str) -> bool:
    """True when the process that journaled an operation no longer runs on this host."""
    if owner == OWNER:
        return False
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine's operation: never undone from here
    return int(pid) == os.getpid() or not pid_alive(int(pid))


def _drain(db: Database, step: Callable[[Session], list[tuple[str, int]]], removed: Removed) -> int:
    """Run `step` in one transaction after another until it returns nothing."""
    total = 0
    while True:
        with db.write() as s:
            done = step(s)
            for table, row_id in done:
                if table != "profiles":
                    s.tasks.drop_embed(table, row_id)
            s.after(functools.partial(removed, done))
        if not done:
            return total
        total += len(done)


def _undo(db: Database, op: int, removed: Removed) -> int:
    return _drain(db, lambda s: s.journal.undo(op, JOURNAL_CHUNK), removed)


def _forget(db: Database, op: int) -> None:
    """Drop the journal of `op` (its pending deletes included) and the operation."""
    while True:
        with db.write() as s:
            if s.journal.forget(op, JOURNAL_CHUNK) == 0:
                return


def _finish(db: Database, op: int, removed: Removed) -> None:
    """Past the commit point: carry out the pending deletes of a move, forget the journal."""
    _drain(db, lambda s: s.journal.redo_deletes(op, JOURNAL_CHUNK), removed)
    _forget(db, op)


def recover(db: Database, removed: Removed) -> list[str]:
    """Finish or undo the bulk operations whose process is gone; returns what was done."""
    with db.read() as s:
        ops = [op for op in s.journal.ops() if _owner_gone(op.owner)]
    done = []
    for op in ops:
        if op.phase == "writing":
            n = _undo(db, op.id, removed)
            _forget(db, op.id)
            done.append(f"undid the interrupted {op.kind} started {op.started_at} ({n} rows removed)")
        else:
            _finish(db, op.id, removed)
            done.append(f"finished the interrupted {op.kind} started {op.started_at}")
        log.warning("bulk write journal: %s", done[-1])
    return done


def claimed(s: Session, memory_id: int, table: str = "memories") -> bool:
    """Claim row `memory_id` of `table` for a write outside any bulk operation (`JournalRepo.claim`,
    in the caller's transaction): an unfinished import's undo then keeps the row as the
    write left it. Returns True (so a write can be its condition); raises Refused
    when a merge in progress is moving the row (its copy was taken: the write would be lost)."""
    if not s.journal.claim(table, memory_id):
        kind = "episode" if table == "episodes" else "memory"
        raise Refused(f"{kind} {memory_id} is being moved by merge_memories; retry when the merge has finished")
    return True


class BulkRun:
    """One journaled bulk operation (see the module doc).

    Args:
        db: the database; kind: "import" | "merge"; detail: recorded with the operation;
        removed: told about rows an undo removes (the resident index forgets them).
    """

    def __init__(self, db: Database, kind: str, detail: dict[str, Any], removed: Removed) -> None:
        self.db = db
        self.kind = kind
        self.removed = removed
        recover(db, removed)
        with db.write() as s:
            self.op = s.journal.begin(kind, OWNER, detail)

    def write(self, items: Sequence[T], write_one: Callable[[Session, int, T], None],
              progress: Callable[[int], None] | None = None) -> None:
        """`write_one(session, op, item)` for every item, in chunks of ≤ CHUNK_SECONDS."""
        i = 0
        while i < len(items):
            with self.db.write() as s:
                started = time.monotonic()
                while True:  # at least one row per chunk
                    write_one(s, self.op, items[i])
                    i += 1
                    if i == len(items) or time.monotonic() - started >= CHUNK_SECONDS:
                        break
            if self.db.wal_bytes() > WAL_CHECKPOINT_BYTES:
                self.db.checkpoint()
            yield_gil()  # the lock is free: let a waiting writer or reader thread run first
            if progress is not None:
                progress(i)

    def commit(self, phase: str = "done", last: Callable[[Session], None] | None = None) -> None:
        """The commit point — with `last(session)` in its transaction, which then stands or falls
        with the operation (the declarations an import or merge carries) —; then the journal is
        forgotten (and a move's deletes done)."""
        with self.db.write() as s:
            if last is not None:
                last(s)
            s.journal.set_phase(self.op, phase)
        _finish(self.db, self.op, self.removed)
        self.db.checkpoint()

    def abort(self) -> int:
        """Undo everything written so far; returns the rows removed."""
        n = _undo(self.db, self.op, self.removed)
        _forget(self.db, self.op)
        return n

    def rolled_back(self) -> str:
        """`abort`, said for an answer: "rolled back (N rows removed)", or — when the undo
        fails too (the database busy or gone) — that it did not, and when it will happen."""
        try:
            return f"rolled back ({self.abort()} rows removed)"
        except Exception as err:  # noqa: BLE001 — reported in the answer, never swallowed
            log.warning("bulk write journal: undoing the %s failed: %s", self.kind, err)
            return (f"NOT rolled back yet ({type(err).__name__}: {err}): the rows written so far stay until the "
                    f"next start of the server, an import or a merge undoes them")
