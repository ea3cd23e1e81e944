"""The storage contract (storage/ports/) is checked against both backends by mypy through
storage/conformance.py: that module must name the database, the session and every
repository the session exposes."""

from __future__ import annotations

import ast
from pathlib import Path

from cpersona.storage import ports


def test_the_conformance_check_covers_the_database_the_session_and_every_repository():
    source = Path(ports.__file__).parents[1] / "conformance.py"
    checked = {node.name for node in ast.parse(source.read_text(encoding="utf-8")).body
               if isinstance(node, ast.FunctionDef)}
    repositories = {name for name, member in vars(ports.Session).items() if isinstance(member, property)}
    assert len(repositories) == 16
    assert {"databases", "sessions", *repositories} <= checked
