"""Install one pinned release of this distribution into the running environment.

The command is `<this interpreter> -m pip install --no-input <distribution>==<version>`:
the interpreter running the server (so its own environment, never another one or the user
site: PIP_USER is forced off), this distribution's name only, and the exact version the
verified release list offered. It refuses where pip would do harm: when the distribution is
not installed under that name here, or is an editable (development) install that pip would
replace with a wheel. The new code runs after a restart.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cpersona

#: Seconds pip may take before the install is abandoned.
PIP_TIMEOUT_SECS = 600
#: Characters of pip's output kept in the answer.
OUTPUT_TAIL_CHARS = 2000

Runner = Callable[..., subprocess.CompletedProcess]


def install_command(distribution: str, version: str) -> list[str]:
    """The pip command for `distribution==version` in this interpreter's environment."""
    return [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
            f"{distribution}=={version}"]


def install_problem(distribution: str) -> str | None:
    """Why installing over the running copy must not happen, or None when it may: the
    distribution is not installed here, or the running code is not the installed copy in
    this environment's site-packages (an editable install or a source checkout, which pip
    would shadow with a wheel)."""
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return (f"{distribution} is not installed in this environment ({sys.prefix}); "
                "install it with pip rather than updating in place")
    running = Path(cpersona.__file__).resolve().parent
    sites = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    if not any(running.is_relative_to(site) for site in sites):
        return (f"the running code ({running}) is a source checkout or an editable install, not the installed "
                f"{distribution} of this environment; update the checkout instead")
    return None


def run_install(distribution: str, version: str, runner: Runner = subprocess.run) -> dict[str, Any]:
    """Run pip; returns {ok, version, command, returncode, output} (output = pip's last lines)."""
    command = install_command(distribution, version)
    env = {**os.environ, "PIP_USER": "0"}
    try:
        done = runner(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_SECS, env=env, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return {"ok": False, "version": version, "command": command, "error": f"{type(err).__name__}: {err}"}
    output = ((done.stdout or "") + (done.stderr or ""))[-OUTPUT_TAIL_CHARS:]
    return {"ok": done.returncode == 0, "version": version, "command": command, "returncode": done.returncode,
            "output": output}
