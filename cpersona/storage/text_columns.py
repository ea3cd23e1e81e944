"""Text columns read as text, whatever another program wrote into them.

SQLite stores what it is given: a program binding bytes puts a BLOB into `memories.content`,
and a TEXT value may hold bytes that are not UTF-8. Python's sqlite3 then hands back `bytes`
(which no JSON answer can carry) or fails the whole fetch ("Could not decode to UTF-8
column …"), so one such row made every recall of its agent fail. So:

* every connection of the storage layer reads text values through `lenient_text`
  (`prepare`: its `text_factory`), which decodes UTF-8 with U+FFFD for what is not UTF-8 —
  as FTS5 itself reads such a value;
* the statements that hand rows to a caller read their text columns as `text(column)`
  (`CAST(column AS TEXT)`: a BLOB's bytes, or a number's digits, as text), so the row is
  found, shown and exported, and `checkup` can name it;
* a statement that compares a column with text read earlier compares it as it reads
  (`SAME_TEXT`, through the SQL function `cpersona_text` every connection has), so a vector
  made of such a row's text is written and its embedding task ends.

(sqlite3's per-declared-type converters would do both at once, but CPython hands a
converter's column None for an empty string — every `project_id` '' would read as NULL.)
A NULL stays None.
"""

from __future__ import annotations

import sqlite3
from functools import partial

#: bytes → str: UTF-8 with U+FFFD for each byte sequence that is not UTF-8.
lenient_text = partial(str, encoding="utf-8", errors="replace")


#: SQL true when column `{col}` reads as the text bound twice after it (plain equality first).
SAME_TEXT = "({col} = ? OR cpersona_text(CAST({col} AS BLOB)) = ?)"


def _read_bytes(raw: bytes | None) -> str | None:
    return None if raw is None else lenient_text(raw)


def _is_clean_text(kind: str, raw: bytes | None) -> bool:
    """True for a TEXT value whose bytes are UTF-8 (SQLite itself never checks) without NUL
    (which no write path of ours accepts, so an export holding one would not import)."""
    if kind != "text" or raw is None or b"\x00" in raw:
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def prepare(conn: sqlite3.Connection) -> sqlite3.Connection:
    """`conn` reading every text value leniently (its `text_factory`) and knowing the SQL
    functions cpersona_text(CAST(x AS BLOB)) → x as it reads, and
    cpersona_is_clean_text(typeof(x), CAST(x AS BLOB)) → x is UTF-8 text without NUL
    (functions cannot be added while a statement runs: they are added here, once); returns it."""
    conn.text_factory = lenient_text
    conn.create_function("cpersona_text", 1, _read_bytes, deterministic=True)
    conn.create_function("cpersona_is_clean_text", 2, _is_clean_text, deterministic=True)
    return conn


def text(column: str) -> str:
    """SQL reading `column` as text whatever its storage class (NULL stays NULL)."""
    return f"CAST({column} AS TEXT)"


#: Columns of the memory tables that hold numbers; every other column read back is text.
NUMERIC = frozenset({"id", "locked", "recall_count", "resolved"})


def read(column: str) -> str:
    """`column` as a SELECT item: a text column read as `text(column)` under its own name."""
    return column if column in NUMERIC else f"{text(column)} AS {column}"


def select_list(columns: tuple[str, ...] | list[str]) -> str:
    """`columns` as a SELECT list, each read by `read`."""
    return ", ".join(map(read, columns))
