"""A virtual-time run of an aioquic release other than the pinned one
(harness.endpoints.releases), in a child process: the harness has imported the pinned
aioquic, and one Python process holds one version of a package. The child puts the
release first on its path and runs the same loop (harness.virtual._run); the run
directory is the same as in-process, and so are the statistics returned.

    python -m harness.virtual.release    (stdin: the pickled arguments; stdout: the statistics)
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


class ReleaseRunError(RuntimeError):
    """The child failed before it could report; the message holds its last lines."""


def run(release_dir: Path, schedule, out: Path, plan, opts, names: list[str]) -> dict:
    from harness.testbed import lifeline

    path = [str(release_dir), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
    proc = lifeline.popen([sys.executable, "-m", "harness.virtual.release"], env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        got, err = proc.communicate(pickle.dumps((schedule, out, plan, opts, names)))
    finally:
        if proc.poll() is None:  # interrupted: the child goes too
            proc.kill()
            proc.wait()
        lifeline.release(proc)
    if proc.returncode != 0 or not got:
        tail = " / ".join(err.decode(errors="replace").strip().splitlines()[-4:])
        raise ReleaseRunError(f"the virtual run of {release_dir.name} exited {proc.returncode}: {tail}")
    return pickle.loads(got)


def _main() -> None:
    args = pickle.loads(sys.stdin.buffer.read())
    # The statistics go to the real stdout; anything the stack prints goes to stderr.
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from harness.virtual import _run

    stats = _run(*args)
    answer.write(pickle.dumps(stats))
    answer.close()


if __name__ == "__main__":
    _main()
