"""Network namespaces for one client/server pair, and their cleanup.

Every namespace this suite creates is named ``ll-<owner pid>-<4 hex>``. The
owner pid lets :func:`sweep_stale` tell what a killed earlier run left behind
(owner no longer alive) from what a concurrent run still uses.

Addresses are from the benchmarking range 198.18.0.0/15 only, and no namespace
ever gets a default route, so no packet can leave the pair.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from pyroute2 import NetNS, netns

from harness.testbed import lifeline

PREFIX = "ll-"
_NAME_RE = re.compile(r"^ll-(\d+)-[0-9a-f]{4}$")

CLIENT_ADDR = "198.18.0.1/24"
CLIENT_SUBNET = "198.18.0.0/24"
SERVER_ADDR = "198.19.0.1/24"
SERVER_SUBNET = "198.19.0.0/24"
TXQUEUELEN = 5000

_64_MIB = 64 * 1024 * 1024
# IPv6 off: router solicitations and the like would cross the emulated link.
# TCP buffer limits raised so that buffers, not the host, limit fast flows.
NAMESPACE_SYSCTLS = {
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
    "net.ipv4.tcp_rmem": f"4096 131072 {_64_MIB}",
    "net.ipv4.tcp_wmem": f"4096 16384 {_64_MIB}",
}
# The kernel shows these read-only inside other namespaces (the initial
# namespace's value applies), so they are raised there, never lowered.
GLOBAL_MINIMUMS = {
    "net.core.rmem_max": _64_MIB,
    "net.core.wmem_max": _64_MIB,
}

# Run in a child inside the namespace: /proc/sys/net shows the namespace of the
# reading task. Writes each key=value and reads it back, because `sysctl -w`
# exits 0 even when the kernel refuses a value.
_SYSCTL_CHILD = """
import sys
for item in sys.argv[1:]:
    key, value = item.split("=", 1)
    path = "/proc/sys/" + key.replace(".", "/")
    try:
        with open(path, "w") as f:
            f.write(value)
        with open(path) as f:
            got = f.read().split()
    except OSError as err:
        sys.exit(f"{key}: {err}")
    if got != value.split():
        sys.exit(f"{key}: wrote {value!r}, reads {' '.join(got)!r}")
"""


class NetnsError(RuntimeError):
    """A namespace could not be created or configured."""


#: Every name this process has handed out: four hex digits repeat within a long run
#: (a few hundred namespaces), and a name whose namespace is still being removed, or
#: was left by a dead process whose pid this one reuses, makes `netns.create` fail
#: with FileExistsError (seen once in CI, 2026-11-29).
_handed_out: set[str] = set()


def new_name() -> str:
    """Return a fresh namespace name owned by this process: never one it handed out
    before, nor one that exists now."""
    for _ in range(1000):
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(2)}"
        if name not in _handed_out and not os.path.exists(f"/run/netns/{name}"):
            _handed_out.add(name)
            return name
    raise NetnsError(f"no free namespace name {PREFIX}{os.getpid()}-XXXX after 1000 tries: "
                     "list them with `ip netns list` and remove stale ones with `ip netns delete NAME`")


def owner_pid(name: str) -> int | None:
    """Return the owner pid encoded in one of our names, or None if not ours."""
    match = _NAME_RE.match(name)
    return int(match.group(1)) if match else None


def list_ours() -> list[str]:
    """Return every namespace under /run/netns/ that carries our prefix."""
    return sorted(n for n in netns.listnetns() if owner_pid(n) is not None)


def create(name: str) -> None:
    """Create namespace ``name``: IPv6 off, ``lo`` up, socket buffer limits raised.

    Raises NetnsError (after removing the half-made namespace) on failure.
    """
    raise_global_minimums()
    # Registered first: a runner killed between the two still has it removed.
    lifeline.register("netns", name)
    netns.create(name)
    try:
        apply_sysctls(name, NAMESPACE_SYSCTLS)
        with NetNS(name) as ipr:
            (lo,) = ipr.link_lookup(ifname="lo")
            ipr.link("set", index=lo, state="up")
    except BaseException:
        remove(name)
        raise


def remove(name: str) -> None:
    """Kill every process still inside namespace ``name``, then remove it; a
    missing one is not an error. Removing the name alone would leave endpoints of
    a killed run running in an unnamed namespace forever."""
    if name in netns.listnetns():
        for pid in pids_in(name):
            _terminate(pid, grace_s=1.0)
        netns.remove(name)
    lifeline.unregister("netns", name)


def pids_in(name: str) -> list[int]:
    """Processes whose network namespace is ``name`` (by inode, like `ip netns pids`)."""
    try:
        target = os.stat(f"/run/netns/{name}")
    except FileNotFoundError:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            st = os.stat(entry / "ns" / "net")
        except OSError:
            continue  # exited, or a kernel thread
        if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
            found.append(int(entry.name))
    return found


def apply_sysctls(name: str, values: dict[str, str]) -> None:
    """Set sysctls inside namespace ``name``; raise NetnsError naming any refused."""
    argv = ["ip", "netns", "exec", name, sys.executable, "-c", _SYSCTL_CHILD]
    argv += [f"{key}={value}" for key, value in values.items()]
    result = subprocess.run(lifeline.argv(argv), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise NetnsError(f"sysctl in namespace {name} failed: {result.stderr.strip()}")


def raise_global_minimums(minimums: dict[str, int] = GLOBAL_MINIMUMS) -> None:
    """Raise host-wide sysctls to at least ``minimums``; never lower them. A rootless
    run (harness.testbed.rootless) may not: it says once which command would, and goes
    on (socket buffers then cap only flows faster than the host's limit allows)."""
    for key, minimum in minimums.items():
        path = Path("/proc/sys") / key.replace(".", "/")
        have = int(path.read_text())
        if have >= minimum:
            continue
        try:
            path.write_text(str(minimum))
        except OSError:
            if key not in _WARNED:
                _WARNED.add(key)
                print(f"longlook: {key} is {have}, below {minimum}, and only root can raise it; fast links may be "
                      f"limited by socket buffers (`sudo sysctl -w {key}={minimum}`)", file=sys.stderr)


_WARNED: set[str] = set()


def configure_tun(ns: str, dev: str, addr_cidr: str, peer_subnet: str) -> None:
    """Give device ``dev`` in ``ns`` its address, txqueuelen and peer route.

    ``addr_cidr`` like "198.18.0.1/24"; ``peer_subnet`` like "198.19.0.0/24" is
    routed through ``dev``. Deliberately no default route.
    """
    address, prefixlen = addr_cidr.split("/")
    with NetNS(ns) as ipr:
        found = ipr.link_lookup(ifname=dev)
        if not found:
            raise NetnsError(f"no device {dev} in namespace {ns}")
        index = found[0]
        ipr.addr("add", index=index, address=address, prefixlen=int(prefixlen))
        # The real queue is inside the router; a short device queue overflows
        # whenever the router is descheduled.
        ipr.link("set", index=index, state="up", txqlen=TXQUEUELEN)
        ipr.route("add", dst=peer_subnet, oif=index)


@contextlib.contextmanager
def namespace_pair() -> Iterator[tuple[str, str]]:
    """Yield fresh (client_ns, server_ns) names; always remove both on exit.

    Cleanup runs on normal exit, on exceptions and on KeyboardInterrupt; a
    SIGKILLed owner's reaper removes them (harness.testbed.lifeline), and
    :func:`sweep_stale` whatever a reaper killed with its owner left.
    """
    names: list[str] = []
    try:
        for _ in range(2):
            name = new_name()
            names.append(name)
            create(name)
        yield names[0], names[1]
    finally:
        _remove_all(names)


def _remove_all(names: list[str]) -> None:
    """Stop emulators bound to ``names``, then remove the namespaces."""
    for pid in emulator_pids(set(names)):
        _terminate(pid)
    for name in names:
        remove(name)


def pid_alive(pid: int) -> bool:
    """Return True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # Field 3 (after the parenthesised command name) is the state letter.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def emulator_pids(namespaces: set[str] | None = None) -> dict[int, list[str]]:
    """Find running ``longlook-link`` processes via /proc/*/cmdline.

    Returns {pid: namespaces named on its command line}; with ``namespaces``,
    only processes naming at least one of them.
    """
    found: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # exited while we looked
        if not argv or not os.path.basename(argv[0]).startswith(b"longlook-link"):
            continue
        named = [a.decode() for a in argv if owner_pid(a.decode(errors="replace")) is not None]
        if namespaces is None or namespaces.intersection(named):
            found[int(entry.name)] = named
    return found


def _terminate(pid: int, grace_s: float = 2.0) -> None:
    """SIGTERM ``pid``, then SIGKILL if it outlives ``grace_s`` seconds."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.02)


def sweep_stale() -> list[str]:
    """Remove what killed earlier runs left: emulators first, then namespaces.

    A namespace is stale when its owner pid is no longer alive; so is an emulator
    naming a namespace whose owner is dead (whether or not the namespace is still
    there). Returns the names removed.

    The emulator test is by owner, not by the namespace list read above: another
    live run (a pytest-xdist worker, a second suite) can create a pair and start its
    emulator between that listing and the /proc scan, and must not lose it.
    """
    existing = set(list_ours())
    stale = {n for n in existing if not pid_alive(owner_pid(n) or 0)}
    for pid, named in emulator_pids().items():
        if any(n in stale or not pid_alive(owner_pid(n) or 0) for n in named):
            _terminate(pid)
    for name in sorted(stale):
        remove(name)
    return sorted(stale)


def udp_port_bound(pid: int, port: int) -> bool:
    """Whether any socket in the network namespace of process `pid` is bound to UDP
    `port` (/proc/<pid>/net shows that process's namespace)."""
    hex_port = f":{port:04X}"
    for table in ("udp", "udp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                if line.split()[1].endswith(hex_port):
                    return True
    return False
