"""picoquic's releases are aiopquic's (PyPI), which bundles picoquic in its wheel: what
a release's own picoquic registers and which picoquic it is, asked of the installed
release in the endpoint's interpreter (harness.endpoints.releases installs it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from harness.endpoints import StackError

#: Asks a release's own picoquic which controller names (argv[2]) it registers.
#: Through ctypes on the binding's shared object, because aiopquic before 0.5 has no
#: Python call that checks a name, and picoquic then falls back to its default
#: without a word (a "cubic" run would be NewReno).
_PROBE = """
import ctypes, glob, json, sys
so = glob.glob(sys.argv[1] + "/aiopquic/_binding/_transport*.so")
lib = ctypes.CDLL(so[0]) if so else None
get = getattr(lib, "picoquic_get_congestion_algorithm", None)
register = getattr(lib, "picoquic_register_all_congestion_control_algorithms", None)
if get is not None:
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
if register is not None:
    register()
names = json.loads(sys.argv[2])
print(json.dumps([n for n in names if get is not None and get(n.encode())]))
try:
    from aiopquic import _build_info as b
    print(json.dumps({"picoquic": b.PICOQUIC_VERSION, "picoquic_sha": b.PICOQUIC_SHA}))
except ImportError:
    print(json.dumps({}))
"""


def _probe(d: Path, python: str, names: list[str]) -> tuple[list[str], dict]:
    proc = subprocess.run([python, "-c", _PROBE, str(d), json.dumps(names)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(d)))
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or len(lines) != 2:
        why = (proc.stderr.strip().splitlines() or ["no answer"])[-1]
        raise StackError(f"picoquic in {d} did not answer which controllers it has ({why}); pick another release")
    return json.loads(lines[0]), json.loads(lines[1])


def controllers(d: Path, python: str, names: list[str]) -> list[str]:
    """Of `names`, those the release in `d` registers."""
    return _probe(d, python, names)[0]


def bundled(d: Path, python: str) -> dict:
    """The picoquic the release in `d` bundles: its version and commit (empty before
    aiopquic 0.3, which records neither)."""
    return _probe(d, python, [])[1]
