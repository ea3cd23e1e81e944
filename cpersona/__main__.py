"""`python -m cpersona` — same as the `cpersona` command."""

from cpersona.cli import main

raise SystemExit(main())
