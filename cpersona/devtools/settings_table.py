"""The settings table of docs/configuration.md, generated from the declaration in
`cpersona/config.py`.

    python -m cpersona.devtools.settings_table            # print the table
    python -m cpersona.devtools.settings_table --write    # rewrite it in docs/configuration.md

Run it with `--write` after adding or changing a setting; `tests/config/test_settings_table.py`
fails while the page and the declaration disagree. The table sits between the markers
`<!-- settings:start -->` and `<!-- settings:end -->`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cpersona.config import CONFIG_FILE_ENV, SETTINGS, Setting

START, END = "<!-- settings:start -->", "<!-- settings:end -->"
#: The page that holds the table.
PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _default(s: Setting) -> str:
    if s.default == "" or s.default is None:
        return "–"
    if isinstance(s.default, bool):
        return "true" if s.default else "false"
    return f"{s.default:g}" if isinstance(s.default, float) else str(s.default)


def _accepts(s: Setting) -> str:
    return s.describe().replace("|", "\\|")


def table() -> str:
    """The markdown table: one row per setting, in declaration order."""
    lines = ["| variable | default | accepts | meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        name = f"`{s.env}`" + (f" (alias `{s.alias}`)" if s.alias else "")
        meaning = s.description.replace("|", "\\|")
        lines.append(f"| {name} | {_default(s)} | {_accepts(s)} | {meaning} |")
    lines.append(f"| `{CONFIG_FILE_ENV}` | – | a path | The settings file (TOML, `field = value`); default "
                 "`config.toml` in the per-user config directory. |")
    return "\n".join(lines)


def block() -> str:
    """The table with its markers, as the page holds it."""
    return f"{START}\n{table()}\n{END}"


def current(page: str) -> str:
    """The marked block of `page` ('' when the markers are missing)."""
    start, end = page.find(START), page.find(END)
    return page[start:end + len(END)] if start >= 0 and end > start else ""


def rewrite(path: Path = PAGE) -> bool:
    """Replace the marked block of `path` with the generated one. Returns True when it
    changed. Raises ValueError when the markers are missing."""
    text = path.read_text(encoding="utf-8")
    old = current(text)
    if not old:
        raise ValueError(f"{path} has no {START} … {END} block")
    new = text.replace(old, block())
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print (or --write into docs/configuration.md) the settings table.")
    parser.add_argument("--write", action="store_true", help="rewrite the table in docs/configuration.md")
    args = parser.parse_args(argv)
    if not args.write:
        print(table())
        return 0
    changed = rewrite()
    print(f"{PAGE.relative_to(PAGE.parents[1])} settings table {'updated' if changed else 'already up to date'}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
