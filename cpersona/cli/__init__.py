"""The `cpersona` command: argparse subcommands over the service layer (cli/commands.py).

`cpersona hook …` runs before anything else is imported (host/hookrun.py: a host runs it on
every prompt, so it starts with the standard library only)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of `cpersona` / `python -m cpersona`; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"] and not {"-h", "--help"} & set(args):
        from cpersona.host.hookrun import main as run_hook

        return run_hook(args[1:])
    from cpersona.cli.commands import main as run

    return run(args)
