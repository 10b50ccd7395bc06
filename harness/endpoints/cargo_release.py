"""Releases of the Rust stacks from crates.io: the pinned endpoint's sources built
against another release (`--impl quinn@0.11.11`, harness.endpoints.releases).

The endpoint crate and the shared `common` crate are copied with the workspace's
Cargo.lock into the release's directory (src/), the stack's crates are pinned to the
release, cargo resolves what must change with them and keeps the rest as locked,
and the program is built there. Every release of a stack shares one target
directory (<cache>/releases/<stack>/target), so a second release compiles only what
differs. What was built stays on record (src/Cargo.toml, src/Cargo.lock).

A stack's behaviour may live in a companion crate with releases of its own (quinn's
congestion control and loss recovery are quinn-proto's). A quinn release is built
with the companion at the least version that release requires and that has the
features the endpoint uses: the one it was published against, or the first after it
with those features, so `quinn@0.11.9` is close to quinn 0.11.9 as its users first
got it. The version record of each run names both.

The crates.io index is read over HTTPS (its sparse protocol), as cargo reads it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from harness.endpoints import ENDPOINTS_DIR

WORKSPACE = ENDPOINTS_DIR / "rust"
INDEX = os.environ.get("LONGLOOK_CRATES_INDEX", "https://index.crates.io")


@dataclass(frozen=True)
class Crate:
    """A Rust stack as its endpoint builds it: the endpoint crate, the stack's crate,
    and the companion whose version follows the release (its name in the stack's
    manifest may differ: quinn calls quinn-proto `proto`)."""

    endpoint: str
    package: str
    companion: str | None = None


CRATES = {
    "quinn": Crate("quinn-endpoint", "quinn", "quinn-proto"),
    "quiche": Crate("quiche-endpoint", "quiche"),
}


class CratesIndexError(Exception):
    """The index could not be read (the network, or no such crate)."""


def index_entries(package: str) -> list[dict]:
    """The crates.io index's records of `package`, one per published version."""
    name = package.lower()
    prefix = {1: "1", 2: "2", 3: f"3/{name[0]}"}.get(len(name), f"{name[:2]}/{name[2:4]}")
    url = f"{INDEX}/{prefix}/{name}"
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            text = r.read().decode()
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        raise CratesIndexError(f"{url}: {e}") from None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def versions(package: str) -> list[str]:
    """Published, unyanked versions of `package`."""
    return [e["vers"] for e in index_entries(package) if not e.get("yanked")]


def _features(entry: dict) -> set[str]:
    return set(entry.get("features", {})) | set(entry.get("features2", {}))


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def companion_version(crate: Crate, version: str, features: set[str] = frozenset()) -> str | None:
    """The companion's version `crate.package`@`version` was published against: the
    least its requirement allows that offers `features` (the endpoint's), unyanked.
    quinn 0.11.9 allows quinn-proto 0.11.12, which has no qlog feature yet, so it is
    built with 0.11.13, the first that has."""
    if crate.companion is None:
        return None
    entry = next((e for e in index_entries(crate.package) if e["vers"] == version), None)
    dep = next((d for d in (entry or {}).get("deps", [])
                if (d.get("package") or d["name"]) == crate.companion and d.get("kind", "normal") == "normal"), None)
    found = re.search(r"\d+\.\d+(\.\d+)?", dep["req"]) if dep else None
    if found is None:
        return None
    least = _key(found.group(0))
    # A caret requirement on 0.y.z keeps 0.y; on x.y.z (x > 0) keeps x.
    same = (lambda k: k[:2] == least[:2]) if least[0] == 0 else (lambda k: k[0] == least[0])
    fits = sorted((_key(e["vers"]), e["vers"]) for e in index_entries(crate.companion)
                  if not e.get("yanked") and "-" not in e["vers"] and same(_key(e["vers"]))
                  and _key(e["vers"]) >= least and features <= _features(e))
    return fits[0][1] if fits else None


def _pinned_features(manifest: Path, package: str) -> set[str]:
    """The features an endpoint's manifest asks of `package`."""
    line = next((ln for ln in manifest.read_text().splitlines() if re.match(rf"{re.escape(package)}\s*=", ln)), "")
    found = re.search(r"features\s*=\s*\[([^\]]*)\]", line)
    return set(re.findall(r'"([^"]+)"', found.group(1))) if found else set()


def _pin(manifest: Path, package: str, version: str) -> None:
    """Rewrites the `package = { version = "=…"` pin of an endpoint's Cargo.toml."""
    text = manifest.read_text()
    pattern = re.compile(rf'^({re.escape(package)}\s*=\s*\{{\s*version\s*=\s*")=[^"]+(")', re.M)
    if not pattern.search(text):
        raise ValueError(f"{manifest}: no exact pin of {package} to rewrite")
    manifest.write_text(pattern.sub(rf"\g<1>={version}\g<2>", text))


def build(stack: str, version: str, into: Path, program: str) -> subprocess.CompletedProcess:
    """The pinned endpoint built against `stack`@`version` into `into`/`program`."""
    crate = CRATES[stack]
    src = into / "src"
    src.mkdir()
    shutil.copy2(WORKSPACE / "Cargo.lock", src / "Cargo.lock")
    manifest = (WORKSPACE / "Cargo.toml").read_text()
    manifest = re.sub(r"members\s*=\s*\[[^\]]*\]", f'members = ["common", "{crate.endpoint}"]', manifest)
    (src / "Cargo.toml").write_text(manifest)
    for member in ("common", crate.endpoint):
        shutil.copytree(WORKSPACE / member, src / member, ignore=shutil.ignore_patterns("target"))
    _pin(src / crate.endpoint / "Cargo.toml", crate.package, version)
    endpoint_manifest = src / crate.endpoint / "Cargo.toml"
    companion = (companion_version(crate, version, _pinned_features(endpoint_manifest, crate.companion))
                 if crate.companion else None)
    if crate.companion and companion:
        _pin(src / crate.endpoint / "Cargo.toml", crate.companion, companion)
    target = into.parent / "target"
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    proc = subprocess.run(["cargo", "build", "--release", "-j", "2", "-p", crate.endpoint], cwd=src,
                          capture_output=True, text=True, env=env)
    if proc.returncode == 0:
        shutil.copy2(target / "release" / crate.endpoint, into / program)
    return proc


def built_version(stack: str, d: Path) -> str | None:
    """The stack's version in the Cargo.lock the release was built with."""
    lock = d / "src" / "Cargo.lock"
    text = lock.read_text() if lock.exists() else ""
    found = re.search(rf'name = "{re.escape(CRATES[stack].package)}"\nversion = "([^"]+)"', text)
    return found.group(1) if found else None
