"""Releases of a stack other than the one `make setup` pins: `--impl aioquic@1.5.0`.

A release is fetched from its stack's registry and installed into a per-release
cache on first use; a second use finds it there and builds nothing:

    <cache>/releases/<stack>/<version>/        what the endpoint needs (a site dir)
    <cache>/releases/<stack>/<version>.json    written last: the release is complete

<cache> is $LONGLOOK_CACHE, else $XDG_CACHE_HOME/longlook, else ~/.cache/longlook.
An install that fails leaves its log beside the cache (<version>.log) and no
directory, so the next use tries again. The registry is the one the package tool
is configured for (pip honours PIP_INDEX_URL), so a mirror works as it does for
`make setup`.

aioquic's releases come from PyPI, installed as they are: its endpoint
(harness/endpoints/aioquic/endpoint.py) and virtual-time hosts use API that every 1.x
release shares. quic-go's come from the Go module proxy: the endpoint's own sources
are built against the release, which works where its API is the one they use
(the build failing says where it is not). quinn's and quiche's come from crates.io
the same way, built with cargo (harness.endpoints.cargo_release). picoquic's come
from PyPI as aiopquic releases (the binding bundles picoquic in its wheel), installed
with the picoquic endpoint's own Python 3.12 (aiopquic has no wheel for older ones):
`picoquic@0.5.2` is aiopquic 0.5.2, and its record names the picoquic it bundles.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness.endpoints import ENDPOINTS_DIR, StackError, aiopquic_release, cargo_release


class ReleaseError(StackError):
    """A release that does not exist in its registry or does not install here; the
    message names the release, the registry and the fix."""


@dataclass(frozen=True)
class Registry:
    """Where a stack's releases come from: the registry's name (for messages), the
    package's name there, and how a release becomes something the endpoint runs
    ("pip": a site directory on PYTHONPATH; "go": the endpoint's sources built
    against the release, an `endpoint` binary)."""

    name: str
    package: str
    kind: str
    #: The interpreter whose pip lists and installs the releases, relative to the
    #: stack's endpoint directory, where it is not the harness's own.
    python: str | None = None


REGISTRIES = {
    "aioquic": Registry("PyPI", "aioquic", "pip"),
    "quic-go": Registry("the Go module proxy", "github.com/quic-go/quic-go", "go"),
    "quinn": Registry("crates.io", "quinn", "cargo"),
    "quiche": Registry("crates.io", "quiche", "cargo"),
    "picoquic": Registry("PyPI", "aiopquic", "pip", python=".venv/bin/python"),
}
#: Why the other stacks have no releases yet (shown when one is asked for).
NOT_YET = {
    "tquic": "its endpoint is compiled against tquic 1.6's API (crates.io); other releases are not built yet",
    "tcp": "kernel TCP is the running kernel's; it has no releases to choose from",
}
#: A compiled release's program, in its release directory.
PROGRAM = "endpoint"
#: Build tags that pick an endpoint's sources for older releases, as (the first
#: release that no longer needs the tag, tag): quic-go v0.65 changed
#: qlogwriter.NewConnectionFileSeq (harness/endpoints/quic-go/qlogseq*.go).
GO_TAGS = {"quic-go": (("0.65.0", "quicgo_before_v065"),)}


def split(spec: str) -> tuple[str, str | None]:
    """("aioquic", "1.5.0") from "aioquic@1.5.0"; (name, None) without a version."""
    name, at, version = spec.partition("@")
    if at and not version:
        raise ReleaseError(f"{spec!r}: give a release after '@' (e.g. {name}@1.5.0), or none for the pinned one")
    return name, (version or None)


def cache_root() -> Path:
    explicit = os.environ.get("LONGLOOK_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "longlook"


def release_dir(stack: str, version: str) -> Path:
    return cache_root() / "releases" / stack / version


def _beside(stack: str, version: str, suffix: str) -> Path:
    """<version>.json / <version>.log (not Path.with_suffix: "1.5.0" has a suffix ".0")."""
    return release_dir(stack, version).parent / f"{version}{suffix}"


def registry(stack: str) -> Registry:
    if stack not in REGISTRIES:
        raise ReleaseError(f"{stack} has no releases to choose from: {NOT_YET.get(stack, 'unknown stack')}; "
                           f"drop the '@version' to run the pinned release")
    return REGISTRIES[stack]


def releases(stack: str) -> list[str]:
    """Every release the registry serves, oldest first (pre-releases left out), as
    longlook names them (quic-go's v0.65.0 is 0.65.0, as in its caps.json)."""
    reg = registry(stack)
    if reg.kind == "cargo":
        try:
            words, hint = cargo_release.versions(reg.package), ""
        except cargo_release.CratesIndexError as e:
            raise ReleaseError(f"could not list {stack}'s releases on {reg.name} ({e}); check the network or "
                               "LONGLOOK_CRATES_INDEX") from None
    elif reg.kind == "go":
        proc = subprocess.run(["go", "list", "-m", "-versions", reg.package], capture_output=True, text=True,
                              cwd=ENDPOINTS_DIR / stack)
        words = proc.stdout.split()[1:] if proc.returncode == 0 else None
        hint = "check the network or GOPROXY"
    else:
        proc = subprocess.run([_pip_python(stack), "-m", "pip", "index", "versions", reg.package,
                               "--disable-pip-version-check"], capture_output=True, text=True)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("Available versions:")), None)
        words = line.partition(":")[2].split(",") if line else None
        hint = "check the network or PIP_INDEX_URL"
    if words is None:
        why = (proc.stderr.strip().splitlines() or ["no answer"])[-1]
        raise ReleaseError(f"could not list {stack}'s releases on {reg.name} ({why}); {hint}")
    found = []
    for v in words:
        try:
            parsed = Version(v.strip().removeprefix("v"))
        except InvalidVersion:
            continue
        if not parsed.is_prerelease:
            found.append(parsed)
    return [str(v) for v in sorted(found)]


def between(stack: str, first: str, last: str) -> list[str]:
    """The releases from `first` to `last` inclusive, oldest first; each end must exist."""
    served = releases(stack)
    for v in (first, last):
        _known(stack, v, served)
    lo, hi = Version(first), Version(last)
    if lo > hi:
        raise ReleaseError(f"--from {first} is newer than --to {last}; swap them")
    return [v for v in served if lo <= Version(v) <= hi]


def newest_of_each_minor(versions: list[str]) -> list[str]:
    """Of `versions` (oldest first), the newest of each minor version (0.29.0 … 0.29.3
    → 0.29.3), oldest first: "the last N minor releases" as their latest patches."""
    newest: dict[tuple[int, int], str] = {}
    for v in versions:
        parsed = Version(v)
        key = (parsed.major, parsed.minor)
        if key not in newest or parsed > Version(newest[key]):
            newest[key] = v
    return sorted(newest.values(), key=Version)


def _known(stack: str, version: str, served: list[str]) -> None:
    if version not in served:
        near = ", ".join(served[-8:])
        raise ReleaseError(f"{stack}@{version}: {registry(stack).name} has no release {version} of "
                           f"{registry(stack).package} (its latest: {near}); pick one of those")


def is_installed(stack: str, version: str) -> bool:
    d = release_dir(stack, version)
    return d.is_dir() and _beside(stack, version, ".json").exists()


def installed(stack: str) -> list[str]:
    """The releases of `stack` in the cache, oldest first."""
    d = release_dir(stack, "0").parent
    found = [p.name for p in d.iterdir() if is_installed(stack, p.name)] if d.is_dir() else []
    return sorted(found, key=Version)


def ensure(stack: str, version: str, log=None) -> Path:
    """The installed release `stack`@`version`, installing it on first use.
    ReleaseError when the registry has no such release or it does not install."""
    d = release_dir(stack, version)
    if is_installed(stack, version):
        return d
    d.parent.mkdir(parents=True, exist_ok=True)
    # One installer at a time (pytest-xdist workers load the same stacks at once).
    with open(_beside(stack, version, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_installed(stack, version):
            return d
        return _install(stack, version, log)


def _install(stack: str, version: str, log) -> Path:
    d = release_dir(stack, version)
    reg = registry(stack)
    _known(stack, version, releases(stack))
    if log:
        log(f"installing {stack}@{version} from {reg.name} into {d} (first use)")
    # Installed beside its final place and renamed, so an interrupted install never
    # looks complete.
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=d.parent))
    try:
        build = {"go": _go_build, "cargo": _cargo_build}.get(reg.kind, _pip_install)
        proc = build(stack, reg, version, tmp)
        log_path = _beside(stack, version, ".log")
        if proc.returncode != 0:
            log_path.write_text(proc.stdout + proc.stderr)
            said = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
            tail = " / ".join(said[-3:])
            tool = proc.args[0] if reg.kind != "pip" else "pip"
            raise ReleaseError(f"{stack}@{version}: {reg.name}'s release did not {'install' if reg.kind == 'pip' else 'build'} "
                               f"here ({Path(str(tool)).name} exited {proc.returncode}: {tail}); the whole log is "
                               f"{log_path}; pick another release")
        shutil.rmtree(d, ignore_errors=True)
        tmp.rename(d)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    installed = installed_version(stack, d)
    if installed != version:
        shutil.rmtree(d, ignore_errors=True)
        raise ReleaseError(f"{stack}@{version}: the install holds {installed!r}, not {version}; pick another release")
    ships = controllers(stack, d)
    if not ships:
        shutil.rmtree(d, ignore_errors=True)
        raise ReleaseError(f"{stack}@{version}: the release registers none of the controllers the endpoint "
                           f"knows ({', '.join(sorted(_pinned_cc(stack)))}); pick a newer release")
    _beside(stack, version, ".json").write_text(json.dumps({"stack": stack, "version": version, "registry": reg.name,
                                                            "package": reg.package, "controllers": ships,
                                                            **bundles(stack, d)}) + "\n")
    return d


def _pip_python(stack: str) -> str:
    """The interpreter that installs `stack`'s releases: the harness's own, or the
    endpoint's venv where the stack needs another Python (ReleaseError, naming the
    build step, when that venv is not built)."""
    reg = registry(stack)
    if reg.python is None:
        return sys.executable
    python = ENDPOINTS_DIR / stack / reg.python
    if not os.access(python, os.X_OK):
        raise ReleaseError(f"{stack}'s releases install with its endpoint's own Python ({python}), which is not "
                           f"built: run `make setup` (or harness/endpoints/{stack}/build.sh) first")
    return str(python)


def _pip_install(stack: str, reg: Registry, version: str, into: Path) -> subprocess.CompletedProcess:
    # Only the package itself: its dependencies are the endpoint's own, already pinned
    # in the interpreter that runs it (PYTHONPATH puts the release first).
    no_deps = ["--no-deps"] if reg.python else []
    return subprocess.run([_pip_python(stack), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "--no-input", *no_deps, "--target", str(into), f"{reg.package}=={version}"],
                          capture_output=True, text=True)


def _go_build(stack: str, reg: Registry, version: str, into: Path) -> subprocess.CompletedProcess:
    """The pinned endpoint's sources (harness/endpoints/<stack>/*.go, go.mod, go.sum),
    required against the release and built; the sources stay beside the program, so
    what was built is on record (src/go.mod, src/go.sum)."""
    src = into / "src"
    src.mkdir()
    for f in sorted((ENDPOINTS_DIR / stack).iterdir()):
        if f.suffix == ".go" or f.name in ("go.mod", "go.sum"):
            shutil.copy2(f, src / f.name)
    env = dict(os.environ, GOFLAGS="-mod=mod")
    tags = [tag for below, tag in GO_TAGS.get(stack, ()) if Version(version) < Version(below)]
    steps = [["go", "mod", "edit", f"-require={reg.package}@v{version}"], ["go", "mod", "tidy"],
             ["go", "build", "-p", "2", "-trimpath", "-tags", ",".join(tags), "-o", str(into / PROGRAM), "."]]
    out = err = ""
    for cmd in steps:
        proc = subprocess.run(cmd, cwd=src, capture_output=True, text=True, env=env)
        out, err = out + proc.stdout, err + proc.stderr
        if proc.returncode != 0:
            break
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _cargo_build(stack: str, reg: Registry, version: str, into: Path) -> subprocess.CompletedProcess:
    return cargo_release.build(stack, version, into, PROGRAM)


def installed_version(stack: str, d: Path) -> str | None:
    """The version the install itself declares (a wheel's dist-info; the go.mod or
    Cargo.lock it was built with)."""
    reg = registry(stack)
    if reg.kind == "cargo":
        return cargo_release.built_version(stack, d)
    if reg.kind == "go":
        mod = d / "src" / "go.mod"
        for line in (mod.read_text().splitlines() if mod.exists() else []):
            words = line.split()
            if reg.package in words:
                return words[words.index(reg.package) + 1].removeprefix("v")
        return None
    for info in d.glob(f"{reg.package}-*.dist-info"):
        return info.name[len(reg.package) + 1:-len(".dist-info")]
    return None


def controllers(stack: str, d: Path) -> list[str]:
    """The longlook names of the controllers the installed release ships."""
    if stack == "aioquic":
        # aioquic ≥ 0.9.25 has congestion/{reno,cubic}.py; older releases NewReno only.
        have = {"newreno"} | ({"cubic"} if (d / "aioquic" / "quic" / "congestion" / "cubic.py").exists() else set())
        return sorted(have)
    if registry(stack).kind == "cargo":
        # The endpoint's own controller table is built in: the pinned stack's names.
        from harness.endpoints import load

        return sorted(load(stack).cc)
    if stack == "picoquic":
        from harness.endpoints import load

        return aiopquic_release.controllers(d, _pip_python(stack), sorted(load(stack).cc))
    # quic-go: one controller (a CUBIC sender in Reno mode), as the pinned release.
    return ["newreno"]


def bundles(stack: str, d: Path) -> dict:
    """What a binding's release carries inside it (aiopquic: picoquic's version and
    commit), for the record; empty for a stack that is its own package."""
    return aiopquic_release.bundled(d, _pip_python(stack)) if stack == "picoquic" else {}


def pinned_version(stack: str) -> str:
    """The release `make setup` pins, as the registry names it: the stack's version,
    or its binding's where the registry serves the binding ("aiopquic 0.6.1" in
    picoquic's caps.json is 0.6.1)."""
    caps = json.loads((ENDPOINTS_DIR / stack / "caps.json").read_text())
    binding = str(caps.get("binding", ""))
    package, _, version = binding.partition(" ")
    if stack in REGISTRIES and package == REGISTRIES[stack].package and version:
        return version
    return str(caps["version"])


def _pinned_cc(stack: str) -> list[str]:
    from harness.endpoints import load

    return list(load(stack).cc)


def record(stack: str, version: str) -> dict:
    """What ensure() wrote about an installed release."""
    return json.loads(_beside(stack, version, ".json").read_text())
