"""Where export and import files may be: confinement of the paths an agent passes.

Over MCP the path comes from a model, so it is confined to one folder: CPERSONA_EXPORT_DIR,
or `<database folder>/exports` when that is unset (the original CPersona allowed any path
without `..` then; an agent must not be able to overwrite or read any file of the user).
A relative path is taken inside that folder; the resolved path (symbolic links followed)
must lie inside it. The CLI is driven by the user, who may name any path.
"""

from __future__ import annotations

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


def confine(argument: str, raw: object, root: Path | None) -> Path:
    """The path `raw` names, resolved; inside `root` unless `root` is None (CLI).

    Raises:
        InvalidArgument: not a non-empty string, or outside `root`.
    """
    text = validate.text(argument, raw, max_chars=4096, allow_empty=False)
    path = Path(text).expanduser()
    if root is None:
        return path.resolve()
    resolved = (path if path.is_absolute() else root / path).resolve()
    if resolved != root and root not in resolved.parents:
        raise InvalidArgument(argument, f"{text!r} is outside the export folder {root}; use a path inside it "
                                        "(set CPERSONA_EXPORT_DIR to choose the folder)")
    return resolved
