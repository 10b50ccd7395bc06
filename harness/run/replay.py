"""`longlook replay DIR`: re-run exactly the property example saved in DIR, through
the backend, image or command that produced it (README.md, "Reading a failure")."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.endpoints import StackError
from harness.schedule import units


def cmd_replay(a: argparse.Namespace) -> int:
    """Runs the saved example's property test on exactly that example, via pytest."""
    import subprocess

    from harness.testbed.link import REPO_ROOT

    saved = a.dir / "example.json"
    if not saved.exists():
        raise units.UnitError(f"{saved} does not exist; give the example directory a failure report names")
    example = json.loads(saved.read_text())
    nodeid, cc = example["nodeid"], example["cc"]
    if a.cc:
        nodeid, cc = _on_controller(example, a.cc), a.cc
    mode = example.get("mode", "real") if a.mode == "saved" else a.mode
    out = a.dir / ("replay" if not a.cc else f"replay-{cc.replace(':', '_').replace('/', '_')}")
    argv = [sys.executable, "-m", "pytest", nodeid, "--longlook-replay", str(a.dir.resolve()),
            "--artifacts", str(out.resolve()), "-p", "no:cacheprovider", "-q", "--mode", mode]
    if a.cc:
        argv += ["--cc", a.cc]
    how = _replay_backend(example.get("run", {}), a.dir)
    argv += how
    print(f"longlook replay: {nodeid} ({example['stack']} {cc}, {mode} time"
          f"{', ' + ' '.join(how) if how else ''})", flush=True)
    return subprocess.run(argv, cwd=REPO_ROOT, check=False).returncode


def _on_controller(example: dict, cc: str) -> str:
    """The saved example's test id with its target on controller `cc` of the same stack
    (the part of the parametrisation after the target, e.g. a flow count, stays)."""
    from harness.run import Target

    nodeid = example["nodeid"]
    # The saved peer and direction stay: only the sender's controller moves.
    peer, direction = example.get("peer"), example.get("plan", {}).get("direction", "download")
    try:
        saved, other = (Target.parse(example["stack"], c, peer, direction).id for c in (example["cc"], cc))
    except StackError as e:
        raise units.UnitError(f"--cc {cc}: {e}") from None
    test, _, params = nodeid.partition("[")
    if not params.startswith(saved):
        raise units.UnitError(f"{nodeid}: its test id does not name the saved target {saved}; cannot move it to {cc}")
    return f"{test}[{other}{params[len(saved):]}"


def _replay_backend(run: dict, example_dir: Path) -> list[str]:
    """The options that run the example where it ran: the same image (the very build,
    while the engine still has it) or the same local command."""
    import shlex

    if run.get("command"):
        return ["--impl-cmd", shlex.join(run["command"])]
    if run.get("backend") != "docker":
        return []
    image = run["image"]
    meta = example_dir / "docker.json"
    ran_on = json.loads(meta.read_text()).get("image_id") if meta.exists() else None
    if ran_on:
        from harness.testbed import containers

        try:
            now = containers.image_id(image)
        except containers.DockerError:
            now = None
        if now != ran_on:
            try:
                containers.image_id(ran_on)
                print(f"note: {image} has been rebuilt since; replaying on the build that failed ({ran_on[:19]})")
                image = ran_on
            except containers.DockerError:
                print(f"note: the build of {image} that failed ({ran_on[:19]}) is gone; replaying on the current one")
    return ["--backend", "docker", "--image", image]
