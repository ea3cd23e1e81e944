"""`python -m cpersona.checkup [flags]` — the same as `cpersona checkup [flags]`
(the original CPersona's command name, kept for cron jobs written for it)."""

import sys

from cpersona.cli.commands import main

if __name__ == "__main__":
    raise SystemExit(main(["checkup", *sys.argv[1:]]))
