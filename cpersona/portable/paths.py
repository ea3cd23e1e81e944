"""Where export and import files may be: confinement of the paths an agent passes.

Over MCP the path comes from a model, so it is confined to one folder: CPERSONA_EXPORT_DIR,
or `<database folder>/exports` when that is unset (the original CPersona allowed any path
without `..` then; an agent must not be able to overwrite or read any file of the user).
A relative path is taken inside that folder; the resolved path (symbolic links followed)
must lie inside it. The CLI is driven by the user, who may name any path.

Neither may name one of the server's own files (the database, its `-wal` / `-shm` /
`-journal`, the side files beside it): an export written over them destroys the store, and
an import of the live database copies every agent's rows. And over MCP an export replaces
only an earlier export — a file whose first line is a cpersona export header — so an export
folder shared with other files (CPERSONA_EXPORT_DIR=~) loses none of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from cpersona.errors import InvalidArgument
from cpersona.policy import validate


def export_root(export_dir: str, db_file: Path | None) -> Path:
    """The confinement folder: CPERSONA_EXPORT_DIR, else `<database folder>/exports`
    (the current folder's `exports` for an in-memory database)."""
    if export_dir:
        return Path(export_dir).expanduser().resolve()
    base = db_file.parent if db_file is not None else Path.cwd()
    return (base / "exports").resolve()


def confine(argument: str, raw: object, root: Path | None, own: Mapping[Path, str] | None = None,
            written: bool = False) -> Path:
    """The path `raw` names, resolved; inside `root` unless `root` is None (CLI), and none
    of `own` (resolved path → what it is, e.g. "this server's database file"). `written`: the
    call writes the file (through a temporary file whose longer name must fit too).

    Raises:
        InvalidArgument: not a non-empty string, outside `root`, one of `own`, or an existing
            file that is neither a regular file nor a folder (a FIFO would block the call until
            another process opens its other end; a device such as /dev/zero never ends, and an
            export would replace the device node).
    """
    text = validate.text(argument, raw, max_chars=4096, allow_empty=False)
    try:
        return _confined(argument, text, root, own or {}, _TEMP_NAME_BYTES if written else 0)
    except OSError as err:  # a name longer than the file system allows, a loop of links, …
        raise InvalidArgument(argument, f"{text[:80]!r}{'…' if len(text) > 80 else ''} cannot be used as a path: "
                                        f"{err.strerror or err}") from None


#: Bytes of a file name kept free for the temporary file an export writes first (`.<name>.tmp.<pid>`).
_TEMP_NAME_BYTES = 20


def _confined(argument: str, text: str, root: Path | None, own: Mapping[Path, str], spare: int) -> Path:
    path = Path(text).expanduser()
    resolved = path.resolve() if root is None else (path if path.is_absolute() else root / path).resolve()
    allowed = _name_max(resolved.parent) - spare
    if len(os.fsencode(resolved.name)) > allowed:
        why = " (with the temporary file an export writes first)" if spare else ""
        raise InvalidArgument(argument, f"the file name is {len(os.fsencode(resolved.name))} bytes; at most {allowed} "
                                        f"fit in this folder{why}")
    if root is not None and resolved != root and root not in resolved.parents:
        raise InvalidArgument(argument, f"{text!r} is outside the export folder {root}; use a path inside it "
                                        "(set CPERSONA_EXPORT_DIR to choose the folder)")
    what = own.get(resolved)
    if what is not None:
        raise InvalidArgument(argument, f"{resolved} is {what}; name another file")
    if resolved.exists() and not (resolved.is_file() or resolved.is_dir()):
        raise InvalidArgument(argument, f"{resolved} is not a regular file (a FIFO, socket or device); "
                                        "name a regular file")
    return resolved


#: Bytes of an existing file read to recognise an export header on its first line.
_HEADER_PEEK = 65536


def replaceable(argument: str, path: Path) -> None:
    """Refuse to replace an existing file that is not a cpersona export (its first line is
    not a JSON object with `"_type": "header"`): over MCP the export folder may hold the
    user's other files.

    Raises:
        InvalidArgument: `path` exists and is not an earlier export.
    """
    if not path.exists():
        return
    try:
        with open(path, "rb") as f:
            first = f.read(_HEADER_PEEK).split(b"\n", 1)[0]
        head = json.loads(first.decode("utf-8"))
    except (OSError, ValueError):
        head = None
    if not (isinstance(head, dict) and head.get("_type") == "header"):
        raise InvalidArgument(argument, f"{path} exists and is not a cpersona export; it is never replaced "
                                        "over MCP: name a new file")


def _name_max(folder: Path) -> int:
    """The longest file name (bytes) the folder's file system allows; 255 when it cannot say."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # no pathconf (Windows) or no answer for it
        return 255
