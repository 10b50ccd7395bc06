"""Network namespaces without root (issue 22, docs/testbed.md "Without root").

A runner started by a user other than root moves itself, once, into a user namespace
of its own (``unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET)``) in which that user
is mapped to root. There it holds CAP_NET_ADMIN and CAP_SYS_ADMIN over every network
namespace it creates, so the testbed runs unchanged: ``ip netns add`` and ``ip netns
exec``, TUN devices, addresses, routes and the per-namespace sysctls.

Three things make that work, and each is why the code looks as it does:

- **A private /run/netns.** ``ip netns`` and pyroute2 bind namespaces under
  /run/netns, which only root may write. The new mount namespace gets a tmpfs there
  (over /run when /run/netns does not exist), seen by this runner and its children
  only. When the last process of the run exits, the kernel drops that mount
  namespace and with it every namespace bound there: a killed rootless run cannot
  leave one behind, even with its reaper (harness/testbed/lifeline.py) killed too.
- **A network namespace for the runner.** The link emulator enters each host's
  namespace and then returns to its own; a user namespace may enter only namespaces
  it owns, so the runner's must be one of them (it has only ``lo``; the runner needs
  no network of its own, and so nothing can leave the suite's namespaces).
- **Done early, in one thread.** The kernel refuses CLONE_NEWUSER to a process with
  more than one thread, so the pytest plugin enters at configuration time, and the
  CLI before it runs a testbed.

What stays root's: the Docker backend (its engine and ``ip netns attach`` of a
container's namespace live in the initial user namespace); SCHED_FIFO for the
emulator (it runs at normal priority, and says so in its stderr); raising the
host-wide socket buffer limits (net.core.rmem_max and wmem_max: a warning names the
command when they are low). /dev/net/tun must be open to the user, as it is on
Debian and most distributions (mode 0666).
"""

from __future__ import annotations

import ctypes
import errno
import os
import pwd
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

NETNS_DIR = Path("/run/netns")
TUN = Path("/dev/net/tun")
#: The host settings that forbid unprivileged user namespaces: (file, the value that
#: forbids, the command that allows). A kernel without the file has no such switch.
SWITCHES = (
    ("/proc/sys/user/max_user_namespaces", "0", "sudo sysctl -w user.max_user_namespaces=15000"),
    ("/proc/sys/kernel/unprivileged_userns_clone", "0", "sudo sysctl -w kernel.unprivileged_userns_clone=1"),
    ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1",
     "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"),
)
#: ``off`` refuses the rootless mode (a non-root runner then fails as before).
ENV = "LONGLOOK_ROOTLESS"

#: Why entering failed, once it has: every later call says the same.
_refused: str | None = None


class RootlessError(RuntimeError):
    """This user cannot have network namespaces here; the message says what to enable."""


def entered() -> bool:
    """Whether this process (or the runner that started it) runs in our user namespace."""
    return os.environ.get(ENV) == "entered"


def obstacle() -> str | None:
    """Why a non-root user could not enter here, or None when nothing is known to stop it."""
    if os.environ.get(ENV) == "off":
        return f"{ENV}=off refuses the rootless mode; run as root, or unset it"
    if _refused:
        return _refused
    for path, bad, fix in SWITCHES:
        try:
            if Path(path).read_text().strip() == bad:
                return f"this host forbids unprivileged user namespaces ({path} is {bad}); enable them with `{fix}`, or run as root"
        except OSError:
            continue
    if not os.access(TUN, os.R_OK | os.W_OK):
        mode = f"{TUN.stat().st_mode & 0o777:04o}" if TUN.exists() else "missing"
        return (f"{TUN} is not open to user {_user()} (mode {mode}); `sudo chmod 0666 {TUN}` gives it the mode "
                "Debian and most distributions set, or run as root")
    return None


def available() -> bool:
    """Whether namespaces can be had: as root, inside our user namespace, or by entering one."""
    return os.geteuid() == 0 or obstacle() is None


def enter() -> None:
    """Make this process root of a user namespace of its own (see the module's
    docstring); nothing to do as root. Raises RootlessError with the fix when the host
    does not allow it; the refusal is remembered, so later calls fail the same way."""
    global _refused
    if os.geteuid() == 0:
        return
    why = obstacle()
    if why:
        _refused = why
        raise RootlessError(why)
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        if err == errno.EINVAL:
            why = ("could not enter a user namespace: this process already runs threads "
                   "(the runner must enter before it starts any; a bug of longlook's, please report it)")
        else:
            why = (f"could not enter a user namespace ({os.strerror(err)}): this host forbids unprivileged "
                   "user namespaces; enable them (sysctl user.max_user_namespaces, "
                   "kernel.unprivileged_userns_clone), or run as root")
        _refused = why
        raise RootlessError(why)
    # setgroups must be denied before an unprivileged process may write gid_map.
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    if NETNS_DIR.is_dir():
        _mount(libc, "tmpfs", str(NETNS_DIR), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    else:
        # Nobody made /run/netns and only root could: a private /run holds ours.
        _mount(libc, "tmpfs", str(NETNS_DIR.parent), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
        NETNS_DIR.mkdir()
    _loopback_up()
    os.environ[ENV] = "entered"


def _mount(libc, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    if libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise RootlessError(f"could not mount {fstype or 'private'} on {target} in the run's own mount namespace: "
                            f"{os.strerror(err)}; run as root")


def _loopback_up() -> None:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        (lo,) = ipr.link_lookup(ifname="lo")
        ipr.link("set", index=lo, state="up")


def _user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())
