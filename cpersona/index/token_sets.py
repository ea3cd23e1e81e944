"""The word-token sets of stored texts, held in memory: what the word coverage of a recall
asks of every row it scores ("does this row hold the query's word `t`?").

Tokenising a row (`util/words.word_token_set`: NFKC, case folding, Snowball stems, CJK
bigrams) costs ~40 µs; a recall scores ~50 rows, most of which it has never seen before
(at 10k rows the keyword channel, the vector channel and the neighbour turns each bring
their own), so recall spent ~0.8 ms tokenising on the path after its query vector arrived
(benchmarks/README.md, round 15). Here every text's set is kept as one string: its distinct
tokens, each between NUL characters (``"\\0use\\0deploy\\0"``). The tokens are letters and
digits only, so a term is in the set exactly when ``"\\0term\\0"`` is a substring: one C
substring search (~0.2 µs), no hashing of tokens and no false match. A set costs ~0.35 KB
(SCALE: 40 tokens a row), plus the text it is keyed by.

`packed(text)` is the set of `text`, tokenised on first use and kept in a least-recently
used map of MAX_TEXTS texts (keyed by the text itself: a row whose text changed is simply
another key, so no write, by this process or another, can make an answer stale).
`fill(pages)` tokenises a store's texts ahead of use, newest first, yielding the interpreter
between pages (the server starts it in a background thread at start: ~0.4 s of CPU at 10k
rows, ~3.6 s at 100k; memory ~6 MB at 10k rows, ~60 MB at 100k). Thread-safe
(`functools.lru_cache`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

from cpersona.util.threads import yield_gil
from cpersona.util.words import word_token_set

if TYPE_CHECKING:
    from cpersona.storage import Database

log = logging.getLogger(__name__)

#: Texts whose sets are kept: the resident FTS indexes' bound (storage/resident_fts.py), so a
#: store they hold is held here too (~100 MB at the bound).
MAX_TEXTS = 150_000
#: Memories read per read transaction by `fill_from`.
PAGE = 256
#: Separates (and ends) the tokens of a set: never part of a token (letters and digits only).
SEP = "\0"


@lru_cache(maxsize=MAX_TEXTS)
def packed(text: str) -> str:
    """The distinct word-index tokens of `text` (`word_token_set`), each between SEP
    characters; `needle(t) in packed(text)` ⇔ `t in word_token_set(text)`."""
    tokens = word_token_set(text)
    return SEP + SEP.join(tokens) + SEP if tokens else SEP


#: A needle no set holds (sets never have two SEPs in a row: no token is empty).
_NEVER = SEP + SEP


def needle(term: str) -> str:
    """What `packed` holds exactly when `term` is one of the text's tokens (a term that is
    empty or holds SEP is no token: its needle is in no set)."""
    return SEP + term + SEP if term and SEP not in term else _NEVER


def fill(pages: Iterable[list[str]], stop: Callable[[], bool] = lambda: False) -> int:
    """Tokenise the texts of `pages` (each a list of texts, newest first) into `packed`'s
    map, at most MAX_TEXTS of them, yielding the interpreter after each page; stops as soon
    as `stop()` turns true. Returns how many texts were tokenised."""
    done = 0
    for page in pages:
        for text in page:
            if done >= MAX_TEXTS or stop():
                return done
            packed(text)
            done += 1
        yield_gil()
    return done


def fill_from(db: Database, stop: Callable[[], bool] = lambda: False) -> int:
    """`fill` with every memory of `db`, newest first, read PAGE rows per read transaction
    (no long snapshot holds the WAL). Returns how many texts were tokenised.

    Raises:
        StorageError: the database could not be read (the caller logs it: recall then
        tokenises rows as it meets them)."""
    done = fill(_pages(db), stop)
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
