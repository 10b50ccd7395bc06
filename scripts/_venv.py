"""Lets a script under scripts/ be run as `scripts/NAME.py` on a fresh shell: the
shebang's python3 is the system one, which has none of the pinned packages, so the
script starts again under the checkout's .venv (made by `make setup`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
_RESTARTED = "LONGLOOK_SCRIPT_RESTARTED"


def use_checkout_venv(script: str) -> None:
    """Re-executes `script` with the same arguments under .venv/bin/python unless this
    interpreter already is that venv's; without a venv, says how to make one."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    python = VENV / "bin" / "python"
    if not python.exists():
        sys.exit(f"{Path(script).name}: {VENV} does not exist: run `make setup` in {REPO} first")
    if os.environ.get(_RESTARTED) == "1":  # restarted once already: never loop
        sys.exit(f"{Path(script).name}: {python} does not run as the venv {VENV}: run `make setup` again")
    os.environ[_RESTARTED] = "1"
    os.execv(python, [str(python), script, *sys.argv[1:]])
