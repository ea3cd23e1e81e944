"""The word-token sets of stored texts, held in memory: what the word coverage of a recall
asks of every row it scores ("does this row hold the query's word `t`?").

Tokenising a row (`util/words.word_token_set`: NFKC, case folding, Snowball stems, CJK
bigrams) is the dear part of scoring it, and a recall scores dozens of rows, most of which
it has never seen before (the keyword channel, the vector channel and the neighbour turns
each bring their own), on the path after its query vector arrived (measured:
benchmarks/rounds/2026-12-02-round-15-token-sets.md). Here a text's set is kept as one
string: its distinct tokens, each between NUL characters (``"\\0use\\0deploy\\0"``). The
tokens are letters and digits only, so a term is in the set exactly when ``"\\0term\\0"``
is a substring: one C substring search, no hashing of tokens and no false match.

`packed(text)` is the set of `text`, tokenised on first use and kept, keyed by the text
itself (a row whose text changed is simply another key, so no write, by this process or
another, can make an answer stale), least recently used first out, within MAX_BYTES of
memory (texts, sets and their entries, as `sys.getsizeof` counts them); a text whose entry
would take more than MAX_ENTRY_BYTES is tokenised each time, never kept. `fill(pages)`
tokenises a store's texts ahead of use, newest first, until the budget is spent; the server
runs it in a background thread at start, at half a CPU at most (it waits as long as it
worked) and giving way to recalls (what the budget holds and what the fill costs:
benchmarks/rounds/2026-12-03-moved-from-code.md). Thread-safe.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from cpersona.util.threads import yield_gil
from cpersona.util.words import word_token_set

if TYPE_CHECKING:
    from cpersona.storage import Database

log = logging.getLogger(__name__)

#: Memory the held sets may take, bytes: every row of a 100k-row store of ~100-character rows.
MAX_BYTES = 80 * 2**20
#: The largest entry kept (a 16,000-character Latin text with its set: ~35 KB; CJK ~170 KB).
MAX_ENTRY_BYTES = 256 * 2**10
#: An entry's share of the map itself (OrderedDict slot and link), bytes, added to its strings.
ENTRY_OVERHEAD = 120
#: Entries `fill` hands over per hold of the lock.
KEEP_STEP = 512
#: Memories read per read transaction by `fill_from`.
PAGE = 256
#: Separates (and ends) the tokens of a set: never part of a token (letters and digits only).
SEP = "\0"
#: A needle no set holds (sets never have two SEPs in a row: no token is empty).
_NEVER = SEP + SEP


def pack(text: str) -> str:
    """The distinct word-index tokens of `text` (`word_token_set`), each between SEP
    characters; `needle(t) in pack(text)` ⇔ `t in word_token_set(text)`."""
    tokens = word_token_set(text)
    return SEP + SEP.join(tokens) + SEP if tokens else SEP


def needle(term: str) -> str:
    """What a set holds exactly when `term` is one of its tokens (a term that is empty or
    holds SEP is no token: its needle is in no set)."""
    return SEP + term + SEP if term and SEP not in term else _NEVER


def cost(text: str, packed_set: str) -> int:
    """Bytes an entry takes: both strings and its slot in the map."""
    return sys.getsizeof(text) + sys.getsizeof(packed_set) + ENTRY_OVERHEAD


class TokenSets:
    """Sets of texts, least recently used first out, within `budget` bytes (module doc)."""

    def __init__(self, budget: int = MAX_BYTES) -> None:
        self.budget = budget
        self.used = 0
        self._sets: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sets)

    def packed(self, text: str) -> str:
        """`pack(text)`, kept when its entry fits (MAX_ENTRY_BYTES)."""
        with self._lock:
            found = self._sets.get(text)
            if found is not None:
                self._sets.move_to_end(text)
                return found
        found = pack(text)
        self.keep([(text, found)])
        return found

    def keep(self, entries: Iterable[tuple[str, str]]) -> None:
        """Hold each (text, set) that fits, the last one as the most recently used, dropping the
        least recently used beyond the budget."""
        with self._lock:
            for text, packed_set in entries:
                size = cost(text, packed_set)
                if size > MAX_ENTRY_BYTES or text in self._sets:
                    continue
                self._sets[text] = packed_set
                self.used += size
            while self.used > self.budget and self._sets:
                old, old_set = self._sets.popitem(last=False)
                self.used -= cost(old, old_set)

    def clear(self) -> None:
        with self._lock:
            self._sets.clear()
            self.used = 0


#: The process's held sets (a text's set is the same whatever store holds it).
SETS = TokenSets()


def packed(text: str) -> str:
    """The set of `text`, held in `SETS`."""
    return SETS.packed(text)


def fill(pages: Iterable[list[str]], stop: threading.Event | None = None, sets: TokenSets = SETS) -> int:
    """Tokenise the texts of `pages` (each a list of texts, newest first) until `sets`' budget
    is spent, then hold them, the newest as the most recently used (older entries go first);
    texts whose entry would not fit are skipped untokenised. It yields the interpreter after
    each text (a recall beside it would otherwise wait a switch interval each time it needs
    the interpreter: recalls took ~110 ms instead of ~11 at 100k rows while it ran) and
    waits as long as a page took after it. Stops as soon as `stop` is set, waiting included
    (nothing is held then). Returns how many texts it holds."""
    stop = stop or threading.Event()
    chosen: list[tuple[str, str]] = []
    room = sets.budget
    for page in pages:
        started = time.perf_counter()
        for text in page:
            if stop.is_set():
                return 0
            if sys.getsizeof(text) > MAX_ENTRY_BYTES:
                continue
            packed_set = pack(text)
            size = cost(text, packed_set)
            if size > MAX_ENTRY_BYTES:
                continue
            if size > room:
                return _hold(sets, chosen)
            chosen.append((text, packed_set))
            room -= size
            yield_gil()  # a recall waiting for the interpreter runs now, not a switch interval later
        if stop.wait(time.perf_counter() - started):
            return 0
    return _hold(sets, chosen)


def _hold(sets: TokenSets, chosen: list[tuple[str, str]]) -> int:
    """Keep `chosen` (newest first) with the newest as the most recently used, KEEP_STEP
    entries per hold of the lock: a recall asking meanwhile waits for one step, not for all
    (90k entries at once held recalls ~0.1 s at 100k rows)."""
    oldest_first = chosen[::-1]
    for at in range(0, len(oldest_first), KEEP_STEP):
        sets.keep(oldest_first[at: at + KEEP_STEP])
        yield_gil()
    return len(chosen)


def fill_from(db: Database, stop: threading.Event | None = None) -> int:
    """`fill` with every memory of `db`, newest first, read PAGE rows per read transaction
    (no long snapshot holds the WAL). Returns how many texts it holds.

    Raises:
        StorageError: the database could not be read (the caller logs it: recall then
        tokenises rows as it meets them)."""
    done = fill(_pages(db), stop)
    if stop is not None and stop.is_set():
        log.debug("tokenising the stored texts stopped by close")
    else:
        log.debug("word-token sets of %d stored texts held", done)
    return done


def _pages(db: Database) -> Iterator[list[str]]:
    before: int | None = None
    while True:
        with db.read() as s:
            rows = s.memories.texts(before, PAGE)
        if not rows:
            return
        yield [text for _, text in rows if isinstance(text, str)]  # NULL content (another program's row)
        before = rows[-1][0]
