"""The `cpersona` command: argparse subcommands over the service layer (cli/main.py)."""

from cpersona.cli.main import main

__all__ = ["main"]
