"""Where cpersona keeps its per-user files, and which database a process serves — in the
standard library plus `platformdirs`, so the hook client (`cpersona hook …`, which must start
in a few milliseconds: no pydantic, no numpy) finds the same database as the server.

    default_db_path()      data/cpersona.db in the working directory when that file exists
                           (the original CPersona's layout), else cpersona.db in the per-user
                           data directory (platformdirs)
    default_config_file()  config.toml in the per-user config directory
    resolve_db_target()    the database named by CPERSONA_DB_URL / CPERSONA_DB_PATH, the
                           settings file, or the default — the same answer as
                           `Settings.from_env()` for those two settings
    state_dir()            the per-user state directory (hook logs, capture progress)

`config.py` re-exports the first two; `tests/config/test_places.py` checks that
`resolve_db_target` and `Settings` agree.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook client starts lean)
if TYPE_CHECKING:
    from collections.abc import Mapping

APP_NAME = "cpersona"
#: Where the original CPersona kept its database, relative to the working directory.
LEGACY_DB_PATH = Path("data") / "cpersona.db"
#: The variable naming the settings file (read before any setting, so not a setting itself).
CONFIG_FILE_ENV = "CPERSONA_CONFIG_FILE"
#: The two settings that name the database (field names of `config.Settings`).
_DB_FIELDS = ("db_url", "db_path")


def default_db_path(cwd: Path | None = None) -> str:
    """The database used when CPERSONA_DB_PATH is unset: `data/cpersona.db` if that file
    exists in the working directory (the original CPersona's layout, kept so its users
    find their memories), else `cpersona.db` in the per-user data directory (platformdirs:
    ~/.local/share/cpersona on Linux, ~/Library/Application Support/cpersona on macOS,
    %LOCALAPPDATA%\\cpersona on Windows): the same file whatever folder a host starts it in."""
    legacy = (cwd or Path.cwd()) / LEGACY_DB_PATH
    if legacy.is_file():
        return str(legacy)
    return str(Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "cpersona.db")


def default_config_file() -> Path:
    """`config.toml` in the per-user config directory (e.g. ~/.config/cpersona/config.toml)."""
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)) / "config.toml"


def state_dir() -> Path:
    """The per-user state directory (e.g. ~/.local/state/cpersona); not created here."""
    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False))


class DbTarget:
    """The database one process serves: a PostgreSQL URL, or an absolute SQLite path
    (`:memory:` for a database in RAM, which no other process can reach). A value (equal
    when both fields are); a plain class, not a dataclass: `dataclasses` imports `inspect`,
    which the hook client would pay for at every prompt."""

    __slots__ = ("path", "url")

    def __init__(self, url: str, path: str) -> None:
        self.url, self.path = url, path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DbTarget) and (self.url, self.path) == (other.url, other.path)

    def __hash__(self) -> int:
        return hash((self.url, self.path))

    def __repr__(self) -> str:
        return f"DbTarget(url={self.label!r}, path={self.path!r})"

    @property
    def key(self) -> str:
        """The text that names this database for other processes ('' for `:memory:`): the
        URL as configured, else the resolved file path."""
        if self.url:
            return self.url
        return "" if self.path == ":memory:" else self.path

    @property
    def label(self) -> str:
        """The database for a message (a URL without its password)."""
        if not self.url:
            return self.path
        head, at, tail = self.url.rpartition("@")
        if not at:
            return self.url
        scheme, sep, credentials = head.partition("://")
        user = credentials.split(":", 1)[0]
        return f"{scheme}{sep}{user}@{tail}" if sep else tail


def db_target(db_url: str, db_path: str) -> DbTarget:
    """The target of the settings `db_url` / `db_path` as `Settings` reads them (`db_file`:
    `~` expanded, made absolute, symlinks resolved)."""
    if db_url:
        return DbTarget(db_url, "")
    if db_path == ":memory:":
        return DbTarget("", ":memory:")
    return DbTarget("", str(Path(db_path).expanduser().resolve()))


def resolve_db_target(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> DbTarget:
    """The database `Settings.from_env(environ)` would open: for `db_url` and `db_path` the
    environment (CPERSONA_DB_URL, CPERSONA_DB_PATH; blank = unset) wins over the settings
    file (read, as `Settings.resolve` reads it, when `environ` is the process environment or
    names a file with CPERSONA_CONFIG_FILE), which wins over the default.

    Raises:
        ValueError: the settings file cannot be read or is not TOML (the message names it).
    """
    env = os.environ if environ is None else environ
    values: dict[str, str] = {}
    explicit = env.get(CONFIG_FILE_ENV, "").strip()
    if environ is None or explicit:
        values.update(_file_values(explicit))
    for field in _DB_FIELDS:
        raw = env.get("CPERSONA_" + field.upper(), "").strip()
        if raw:
            values[field] = raw
    return db_target(values.get("db_url", ""), values.get("db_path", "") or default_db_path(cwd))


def _file_values(explicit: str) -> dict[str, str]:
    """db_url / db_path from the settings file (keys as `config.read_settings_file` accepts
    them: the field name or the variable name, any case)."""
    path = Path(explicit).expanduser() if explicit else default_config_file()
    if not explicit and not path.is_file():
        return {}
    import tomllib  # only when there is a file: the hook client starts without it

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ValueError(f"settings file {path} ({CONFIG_FILE_ENV}) cannot be read: {err}") from None
    found: dict[str, str] = {}
    for key, value in data.items():
        field = key.lower().removeprefix("cpersona_")
        if field in _DB_FIELDS and not isinstance(value, dict | list):
            text = ("true" if value else "false") if isinstance(value, bool) else str(value)
            if text.strip():
                found[field] = text.strip()
    return found
