"""Releases other than the pinned one (harness.endpoints.releases): the per-release cache, a
release the registry does not have, one that does not install, and the stack a
release gives (its label, its controllers, its place on the endpoint's path)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness import endpoints
from harness.endpoints import releases
from harness.endpoints import StackError


#: Releases these tests install go to a cache of their own (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("own_release_cache")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("LONGLOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_spec_names_the_stack_and_the_release():
    assert releases.split("aioquic@1.5.0") == ("aioquic", "1.5.0")
    assert releases.split("aioquic") == ("aioquic", None)
    with pytest.raises(releases.ReleaseError, match="give a release after '@'"):
        releases.split("aioquic@")


def test_a_release_is_installed_once_and_found_the_second_time(cache, monkeypatch):
    d = releases.ensure("aioquic", "1.6.1")
    assert d == cache / "releases" / "aioquic" / "1.6.1"
    assert releases.installed_version("aioquic", d) == "1.6.1"
    assert (d / "aioquic" / "quic" / "congestion" / "cubic.py").exists()
    assert releases.record("aioquic", "1.6.1")["controllers"] == ["cubic", "newreno"]

    def no_install(*args, **kwargs):
        raise AssertionError("the second use installed again")

    monkeypatch.setattr(releases, "_install", no_install)
    monkeypatch.setattr(releases, "releases", no_install)  # not even the registry is asked
    assert releases.ensure("aioquic", "1.6.1") == d


def test_the_release_gives_a_stack_that_runs_from_its_cache(cache):
    stack = endpoints.load("aioquic@1.6.1")
    pinned = endpoints.load("aioquic")
    assert (stack.name, stack.version, stack.label) == ("aioquic", "1.6.1", "aioquic@1.6.1")
    assert stack.release_dir == releases.release_dir("aioquic", "1.6.1")
    assert set(stack.cc) == {"newreno", "cubic"} and stack.mutants == {}
    assert pinned.release_dir is None and pinned.label == "aioquic"
    # The pinned release by number is the pinned stack, not a copy from the cache.
    assert endpoints.load(f"aioquic@{pinned.version}") == pinned


def test_a_release_the_registry_does_not_have_is_named_with_the_fix(cache):
    with pytest.raises(StackError) as e:
        endpoints.load("aioquic@9.9.9")
    msg = str(e.value)
    assert "aioquic@9.9.9" in msg and "PyPI has no release 9.9.9" in msg and "1.7.2" in msg
    assert not (cache / "releases" / "aioquic" / "9.9.9").exists()


def test_a_stack_without_releases_says_why(cache):
    with pytest.raises(StackError, match="tquic has no releases to choose from.*drop the '@version'"):
        endpoints.load("tquic@1.5.0")


def _broken_index(root: Path) -> str:
    """A package index (PEP 503, a directory) whose only aioquic release fails to build:
    its in-tree build backend raises, as a release whose C extension does not compile would."""
    src = root / "src" / "aioquic-0.0.1"
    src.mkdir(parents=True)
    (src / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n')
    (src / "backend.py").write_text("def build_wheel(*a, **k):\n    raise RuntimeError('this release does not build')\n")
    (src / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: aioquic\nVersion: 0.0.1\n")
    index = root / "index" / "aioquic"
    index.mkdir(parents=True)
    with tarfile.open(index / "aioquic-0.0.1.tar.gz", "w:gz") as tar:
        tar.add(src, arcname=src.name)
    (index / "index.html").write_text('<html><body><a href="aioquic-0.0.1.tar.gz">aioquic-0.0.1.tar.gz</a></body></html>\n')
    return (root / "index").as_uri()


def test_a_release_that_does_not_build_is_named_and_leaves_nothing_half_installed(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", _broken_index(tmp_path / "pypi"))
    assert releases.releases("aioquic") == ["0.0.1"]
    with pytest.raises(releases.ReleaseError) as e:
        releases.ensure("aioquic", "0.0.1")
    msg = str(e.value)
    assert "aioquic@0.0.1" in msg and "did not install here" in msg and "pick another release" in msg
    log = cache / "releases" / "aioquic" / "0.0.1.log"
    assert log.exists() and "this release does not build" in log.read_text()
    assert not releases.is_installed("aioquic", "0.0.1")
    assert [p.name for p in (cache / "releases" / "aioquic").iterdir() if not p.name.endswith((".log", ".lock"))] == []


def test_between_lists_the_releases_in_order_and_checks_both_ends(cache):
    got = releases.between("aioquic", "1.5.0", "1.7.2")
    assert got[0] == "1.5.0" and got[-1] == "1.7.2" and {"1.6.0", "1.6.1", "1.7.0"} <= set(got)
    assert got == sorted(got, key=lambda v: tuple(map(int, v.split("."))))
    with pytest.raises(releases.ReleaseError, match="swap them"):
        releases.between("aioquic", "1.7.2", "1.5.0")
    with pytest.raises(releases.ReleaseError, match="no release 1.5.9"):
        releases.between("aioquic", "1.5.9", "1.7.2")


def test_a_release_is_judged_against_the_pinned_findings(tmp_path):
    """A finding recorded on the pinned release marks the same case on another release
    (the plugin makes it non-strict there)."""
    import dataclasses

    from harness.run import Target
    from harness.verdict.findings import FINDINGS, case_keys

    pinned = endpoints.load("aioquic")
    older = dataclasses.replace(pinned, version="1.0.0", release_dir=tmp_path)
    prop, case = next((p, c) for p, c in FINDINGS if c == "aioquic-newreno")
    target = Target(older, older.resolve_cc("newreno"))
    assert target.id == "aioquic@1.0.0-newreno"
    keys = case_keys(prop, target.id, target)
    assert (prop, "aioquic-newreno") in keys and all(k[0] == prop for k in keys)
    # The pinned release is keyed by its name alone, as before.
    assert case_keys(prop, "aioquic-newreno", Target(pinned, pinned.resolve_cc("newreno"))) == [(prop, "aioquic-newreno")]


def test_a_release_reruns_bit_identical_in_virtual_time_with_its_own_code(tmp_path):
    """The child process imports the release, not the pinned aioquic, and the
    determinism patches reach it (which modules import os differs by release)."""
    pytest.importorskip("longlook_link", reason="bindings not built: run `make setup`")
    from virtual_runs import files, lossy

    from harness.testbed.topology import EndpointOptions, TransferPlan
    from harness.virtual import transfer

    old = endpoints.load("aioquic@1.0.0")  # before the packet-type enum (1.2.0)
    plan, opts = TransferPlan(sizes=(120_000,)), EndpointOptions(cc="cubic")
    a = transfer(lossy(3), tmp_path / "a", old, plan, opts)
    b = transfer(lossy(3), tmp_path / "b", old, plan, opts)
    assert a.ok and b.ok, (a.reason, b.reason)
    assert files(tmp_path / "a") == files(tmp_path / "b")
    record = json.loads((tmp_path / "a" / "server" / "app.ndjson").read_text().splitlines()[0])
    assert record["event"] == "version" and record["version"] == "1.0.0" and record["cc"] == "cubic"


@pytest.mark.netns
def test_a_release_runs_in_real_time_in_the_namespaces(netns_ready, tmp_path):
    out = tmp_path / "t"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "transfer", "--impl", "aioquic@1.6.1", "--mode", "real",
                        "--bytes", "300KB", "--rate", "20mbit", "--rtt", "20ms", "--out", str(out)],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("aioquic@1.6.1 newreno: 300000 bytes")
    for side in ("client", "server"):
        record = json.loads((out / side / "app.ndjson").read_text().splitlines()[0])
        assert record["version"] == "1.6.1", (side, record)


def test_a_quic_go_release_is_the_endpoint_built_against_it(cache):
    """The endpoint's own sources, required against the release (with the build tag
    its older API needs) and built; what was built stays on record."""
    stack = endpoints.load("quic-go@0.64.1")
    d = releases.release_dir("quic-go", "0.64.1")
    assert stack.label == "quic-go@0.64.1" and stack.argv == [str(d / releases.PROGRAM)] and stack.is_built()
    assert "github.com/quic-go/quic-go v0.64.1" in (d / "src" / "go.mod").read_text()
    assert releases.installed_version("quic-go", d) == "0.64.1"
    assert endpoints.load("quic-go").argv == [str(endpoints.load("quic-go").run)]


def test_a_quic_go_release_whose_api_the_endpoint_does_not_speak_fails_to_build_with_the_reason(cache):
    with pytest.raises(StackError) as e:
        endpoints.load("quic-go@0.55.0")
    msg = str(e.value)
    assert "quic-go@0.55.0" in msg and "did not build here" in msg and "NewConnectionFileSeq" in msg
    assert not releases.is_installed("quic-go", "0.55.0")
    assert (cache / "releases" / "quic-go" / "0.55.0.log").exists()


def test_impls_says_which_stacks_have_releases_and_which_are_installed(cache, capsys):
    from harness import cli

    releases.ensure("aioquic", "1.6.1")
    assert releases.installed("aioquic") == ["1.6.1"] and releases.installed("quic-go") == []
    assert cli.main(["impls"]) == 0
    out = capsys.readouterr().out
    assert "releases: any from PyPI as --impl aioquic@VERSION; installed: 1.6.1" in out
    assert "releases: any from the Go module proxy as --impl quic-go@VERSION; installed: none yet" in out
    assert "releases: any from crates.io as --impl quinn@VERSION" in out
    assert "releases: any from PyPI as --impl picoquic@VERSION" in out
    assert "tquic@" not in out


def test_a_crates_release_pins_the_stack_and_the_companion_it_was_published_with(tmp_path, monkeypatch):
    """quinn's congestion control is quinn-proto's: quinn@V is built with the least
    quinn-proto V allows that has the endpoint's features. The endpoint's manifest is
    rewritten, the rest kept."""
    from harness.endpoints import cargo_release

    index = {"quinn": [{"vers": "0.11.9", "yanked": False,
                        "deps": [{"name": "proto", "package": "quinn-proto", "req": "^0.11.12", "kind": "normal"},
                                 {"name": "udp", "package": "quinn-udp", "req": "^0.5", "kind": "normal"}]},
                       {"vers": "0.11.10", "yanked": True, "deps": []}],
             "quinn-proto": [{"vers": "0.11.11", "features": {"qlog": []}},
                             {"vers": "0.11.12", "features": {"log": []}},
                             {"vers": "0.11.13", "features": {"log": []}, "features2": {"qlog": []}},
                             {"vers": "0.11.14", "features": {"qlog": []}},
                             {"vers": "0.12.0", "features": {"qlog": []}}]}
    monkeypatch.setattr(cargo_release, "index_entries", lambda package: index[package])
    assert cargo_release.versions("quinn") == ["0.11.9"]  # a yanked release is not offered
    crate = cargo_release.CRATES["quinn"]
    assert cargo_release.companion_version(crate, "0.11.9") == "0.11.12"  # published against
    assert cargo_release.companion_version(crate, "0.11.9", {"qlog"}) == "0.11.13"  # the first with qlog
    assert cargo_release.companion_version(crate, "0.11.9", {"no-such"}) is None
    assert cargo_release.companion_version(cargo_release.CRATES["quiche"], "0.29.0") is None
    manifest = tmp_path / "Cargo.toml"
    manifest.write_text((cargo_release.WORKSPACE / crate.endpoint / "Cargo.toml").read_text())
    assert cargo_release._pinned_features(manifest, "quinn-proto") == {"rustls-ring", "qlog"}
    cargo_release._pin(manifest, "quinn", "0.11.9")
    cargo_release._pin(manifest, "quinn-proto", "0.11.13")
    text = manifest.read_text()
    assert 'quinn = { version = "=0.11.9"' in text and 'quinn-proto = { version = "=0.11.13"' in text
    assert 'features = ["runtime-tokio", "rustls-ring", "qlog"]' in text  # the rest as pinned
    with pytest.raises(ValueError, match="no exact pin of tokio"):
        cargo_release._pin(manifest, "tokio", "1.0.0")


def test_an_unreachable_crates_index_is_named_with_the_fix(cache, monkeypatch):
    from harness.endpoints import cargo_release

    monkeypatch.setattr(cargo_release, "INDEX", "http://127.0.0.1:9")
    with pytest.raises(releases.ReleaseError, match="could not list quinn's releases on crates.io.*LONGLOOK_CRATES_INDEX"):
        releases.releases("quinn")


def test_a_release_of_a_compiled_virtual_host_runs_in_real_time():
    from harness import virtual

    assert "real time only" in virtual.supports("quinn@0.11.11")
    assert virtual.supports("quinn") is None and virtual.supports("aioquic@1.6.1") is None


def test_a_quinn_release_without_the_endpoints_features_fails_to_build_with_the_reason(cache):
    """quinn 0.11.8 has no qlog feature, which the endpoint needs: cargo refuses it
    before compiling anything, and the message says so."""
    with pytest.raises(StackError) as e:
        endpoints.load("quinn@0.11.8")
    msg = str(e.value)
    assert "quinn@0.11.8" in msg and "did not build here" in msg and "qlog" in msg
    assert not releases.is_installed("quinn", "0.11.8")
    assert (cache / "releases" / "quinn" / "0.11.8.log").exists()


def test_a_quinn_release_is_the_endpoint_built_against_it_and_its_companion(cache):
    """quinn@0.11.11: the pinned endpoint's sources built against quinn 0.11.11 and
    the quinn-proto it was published with (0.11.15); a verified transfer over
    loopback reports both in its version record. About a minute on first build."""
    from rust_endpoints import Pair, applog_records, run_pair

    stack = endpoints.load("quinn@0.11.11")
    d = releases.release_dir("quinn", "0.11.11")
    assert stack.label == "quinn@0.11.11" and stack.argv == [str(d / releases.PROGRAM)] and stack.is_built()
    assert releases.installed_version("quinn", d) == "0.11.11"
    assert 'quinn-proto = { version = "=0.11.15"' in (d / "src" / "quinn-endpoint" / "Cargo.toml").read_text()
    pair = Pair(cache / "pair")
    pair.add_file("r.bin", 300_000)
    program = d / releases.PROGRAM
    run_pair(pair, program, program)
    assert pair.client_rc == 0, pair.describe()
    assert (pair.downloads / "r.bin").read_bytes() == pair.files["r.bin"].read_bytes()
    version = next(r for r in applog_records(pair.server.applog) if r["event"] == "version")
    assert version["version"] == "0.11.11" and "0.11.15" in json.dumps(version), version
    assert endpoints.load("quinn").argv == [str(endpoints.load("quinn").run)]


def test_a_picoquic_release_is_an_aiopquic_release_with_the_picoquic_it_bundles(cache):
    """picoquic's releases are its binding's (aiopquic on PyPI), installed with the
    endpoint's own Python; the record names the picoquic inside, and the controllers
    are the ones that picoquic itself registers."""
    assert releases.pinned_version("picoquic") == "0.6.1"  # caps.json's "binding", not picoquic's 1.1.53.0
    assert endpoints.load("picoquic@0.6.1") == endpoints.load("picoquic")
    stack = endpoints.load("picoquic@0.4.1")
    assert stack.label == "picoquic@0.4.1" and stack.release_dir == releases.release_dir("picoquic", "0.4.1")
    record = releases.record("picoquic", "0.4.1")
    assert record["package"] == "aiopquic" and record["picoquic"] == "1.1.51.1" and len(record["picoquic_sha"]) == 40
    assert set(stack.cc) == set(record["controllers"]) >= {"newreno", "cubic", "prague", "bbr"}
    assert releases.installed_version("picoquic", stack.release_dir) == "0.4.1"


def test_a_picoquic_release_that_registers_none_of_the_endpoints_controllers_is_refused(cache):
    """aiopquic 0.2.7's picoquic registers no controller by name: every run would be
    picoquic's default whatever LL_CC said, so the release is refused, not installed."""
    with pytest.raises(StackError) as e:
        endpoints.load("picoquic@0.2.7")
    msg = str(e.value)
    assert "picoquic@0.2.7" in msg and "registers none of the controllers" in msg and "pick a newer release" in msg
    assert not releases.is_installed("picoquic", "0.2.7")
    assert not releases.release_dir("picoquic", "0.2.7").exists()


@pytest.mark.netns
def test_a_picoquic_release_older_than_its_settings_runs_and_says_what_it_left_out(netns_ready, cache, tmp_path):
    out = tmp_path / "t"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "transfer", "--impl", "picoquic@0.5.2", "--cc", "cubic",
                        "--bytes", "300KB", "--rate", "20mbit", "--rtt", "20ms", "--out", str(out)],
                       capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("picoquic@0.5.2 cubic: 300000 bytes")
    record = json.loads((out / "server" / "app.ndjson").read_text().splitlines()[0])
    assert record["binding"] == "aiopquic 0.5.2" and record["cc"] == "cubic"
    assert set(record["unsupported"]) == {"pmtud", "ip_family"}
