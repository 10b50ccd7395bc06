"""Docker containers as the hosts of a testbed: the engine check, one endpoint
container's life, its network namespace under a name the emulator can open, and the
sweep of what a killed earlier run left behind.

Containers start with ``--network none``; the harness then names the container's
network namespace ``ll-<owner pid>-<4 hex>`` (``ip netns attach``), so the emulator,
pyroute2 and harness.testbed.netns treat it like any namespace of ours, and
:func:`harness.testbed.netns.sweep_stale` already covers it. Every container carries the
label ``longlook.owner=<pid>``: :func:`sweep_stale` removes those whose owner is gone.
Both the containers and their namespaces' names are registered with the runner's
reaper (harness.testbed.lifeline), which removes them at once if the runner is killed.
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.testbed import lifeline, netns

OWNER_LABEL = "longlook.owner"
#: The interop runner's simulator answers here once the network is up; images wait for it.
SIM_PORT = 57832
ENGINE_FIX = ("run `make docker-engine` (uses a running engine, or installs docker.io and starts "
              "dockerd --bridge=none --iptables=false)")
_CLONE_NEWNET = 0x40000000
#: How long the engine may take to record the exit of a container whose process is gone, s.
EXIT_SETTLE_S = 5.0


class DockerError(RuntimeError):
    """The engine, an image or a container misbehaved; the message names which and the fix."""


def docker(*args: str, timeout_s: float = 30.0, check: bool = True) -> subprocess.CompletedProcess:
    """Runs the docker CLI; DockerError carries its stderr when it fails and `check`."""
    try:
        # The CLI dies with the runner; a container it created is the reaper's.
        done = subprocess.run(lifeline.argv(["docker", *args]), capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise DockerError(f"no docker command on PATH; {ENGINE_FIX}") from None
    except subprocess.TimeoutExpired:
        raise DockerError(f"`docker {' '.join(args[:2])}` did not answer within {timeout_s:.0f} s") from None
    if check and done.returncode != 0:
        raise DockerError(f"`docker {' '.join(args[:2])}` failed: {done.stderr.strip()}")
    return done


def engine_version() -> str:
    """The running engine's version; DockerError with the fix if none answers."""
    try:
        return docker("version", "--format", "{{.Server.Version}}", timeout_s=10.0).stdout.strip()
    except DockerError as e:
        raise DockerError(f"no Docker engine answers ({e}); {ENGINE_FIX}") from None


def image_id(image: str) -> str:
    """The id of a local image; DockerError naming the image and how to get it."""
    done = docker("image", "inspect", "--format", "{{.Id}}", image, check=False)
    if done.returncode != 0:
        name, _, tag = image.partition(":")
        release = tag[:1].isdigit()  # longlook/<stack>:<version>: a release's image
        hint = ("build it with `make docker-images`" if image.startswith("longlook/") and not release
                else f"build it with `scripts/docker-images.sh {name.removeprefix('longlook/')}@{tag}` (the "
                     "release from the cache)" if image.startswith("longlook/")
                else f"load or pull it first (`docker pull {image}` where a registry is reachable)")
        raise DockerError(f"image {image} not found: {hint}")
    return done.stdout.strip()


@dataclass
class Container:
    """One endpoint container, running until :meth:`remove`."""

    id: str
    name: str
    role: str
    image: str
    pid: int = 0
    #: Its network namespace's name under /run/netns ("" until attached).
    ns: str = ""
    returncode: int | None = None
    #: The container's CPU accounting (a cgroup directory; None where none is found).
    cgroup: CpuCgroup | None = None
    #: CPU time of the container at open_sim (its start-up waiting excluded) and at the latest sample, s.
    cpu_base_s: float | None = None
    cpu_last_s: float | None = None
    _listeners: list[socket.socket] = field(default_factory=list)

    def attach_netns(self) -> str:
        """Names the container's network namespace so the emulator can open a TUN in it."""
        self.ns = netns.new_name()
        lifeline.register("netns", self.ns)
        done = subprocess.run(lifeline.argv(["ip", "netns", "attach", self.ns, str(self.pid)]),
                              capture_output=True, text=True)
        if done.returncode != 0:
            lifeline.unregister("netns", self.ns)
            self.ns = ""
            raise DockerError(f"ip netns attach for {self.role} container {self.name}: {done.stderr.strip()}")
        return self.ns

    def open_sim(self) -> None:
        """Listens on SIM_PORT inside the container: its `sim` answers, so it proceeds.

        The kernel completes connections up to the backlog without accept(); a
        wait-for-it probe needs nothing more."""
        self.cpu_base_s = self.sample_cpu()
        self._listeners.append(listen_in_netns(f"/proc/{self.pid}/ns/net", SIM_PORT))

    def sample_cpu(self) -> float | None:
        """The container's CPU time so far, s, remembered as the latest sample. Its
        cgroup goes with its last process, so a container's total is its last sample
        before it exited (wait() samples every 20 ms)."""
        if self.cgroup is not None:
            now = self.cgroup.cpu_s()
            if now is not None:
                self.cpu_last_s = now
        return self.cpu_last_s

    def cpu_used_s(self) -> float | None:
        """CPU time since open_sim, s, as of the latest sample; None if unknown."""
        if self.cpu_base_s is None or self.cpu_last_s is None:
            return None
        return self.cpu_last_s - self.cpu_base_s

    def alive(self) -> bool:
        return netns.pid_alive(self.pid)

    def udp_bound(self, port: int) -> bool:
        """Whether any socket in the container's namespace is bound to UDP `port`."""
        return netns.udp_port_bound(self.pid, port)

    def wait(self, timeout_s: float) -> int | None:
        """The exit status, or None if it still runs after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.sample_cpu()
            if not self.alive():
                break
            time.sleep(0.02)
        # The engine records an exit a moment after the process is gone (a zombie
        # until its shim reaps it): until then it still says running.
        settle = time.monotonic() + EXIT_SETTLE_S
        while True:
            state = docker("inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", self.id).stdout.split()
            if state[0] != "true":
                self.returncode = int(state[1])
                return self.returncode
            if self.alive() or time.monotonic() > settle:
                return None
            time.sleep(0.02)

    def stop(self, grace_s: float = 3.0) -> int | None:
        """SIGTERM (the contract's stop for a server), SIGKILL after `grace_s`."""
        if self.wait(0) is None:
            docker("kill", "--signal", "TERM", self.id, check=False)
            if self.wait(grace_s) is None:
                docker("kill", self.id, check=False)
                self.wait(grace_s)
        return self.returncode

    def save_logs(self, workdir: Path) -> None:
        """The container's stdout and stderr into workdir/stdout and workdir/stderr."""
        with (workdir / "stdout").open("wb") as out, (workdir / "stderr").open("wb") as err:
            subprocess.run(lifeline.argv(["docker", "logs", self.id]), stdout=out, stderr=err, check=False, timeout=30)

    def remove(self) -> None:
        """Removes the container, its namespace's name and the sim listener; idempotent."""
        for sock in self._listeners:
            sock.close()
        self._listeners.clear()
        docker("rm", "--force", "--volumes", self.id, check=False)
        lifeline.unregister("container", self.name)
        if self.ns:
            netns.remove(self.ns)
            self.ns = ""


def run_container(image: str, name: str, role: str, env: dict[str, str], mounts: dict[Path, str],
                  hosts: dict[str, str], caps: tuple[str, ...] = ("NET_ADMIN",)) -> Container:
    """Starts `image` detached with no network, labelled with our pid; returns it running.

    `mounts` maps host paths to container paths (":ro" suffix allowed); `hosts` are
    /etc/hosts entries. DockerError (container removed) when it does not start."""
    argv = ["run", "--detach", "--network", "none", "--name", name, "--hostname", role,
            "--label", f"{OWNER_LABEL}={os.getpid()}", "--label", f"longlook.role={role}",
            # The image's wait-for-sim probe connects to its own address's SIM_PORT from
            # an ephemeral port (32768-60999 holds 57832): one that drew SIM_PORT itself
            # self-connected and held the port our listener then failed to bind (a CI
            # run's EADDRINUSE). Reserved, no ephemeral port is ever SIM_PORT.
            "--sysctl", f"net.ipv4.ip_local_reserved_ports={SIM_PORT}"]
    argv += [f"--cap-add={c}" for c in caps]
    for host, ip in hosts.items():
        argv += ["--add-host", f"{host}:{ip}"]
    for src, dst in mounts.items():
        argv += ["--volume", f"{src}:{dst}"]
    for key, value in env.items():
        argv += ["--env", f"{key}={value}"]
    lifeline.register("container", name)  # before it exists: a kill mid-`docker run` is covered
    done = docker(*argv, image, check=False)
    if done.returncode != 0:
        docker("rm", "--force", name, check=False)
        lifeline.unregister("container", name)
        raise DockerError(f"image {image} did not start as {role}: {done.stderr.strip()}")
    container = Container(done.stdout.strip(), name, role, image)
    state = docker("inspect", "--format", "{{.State.Pid}}", container.id).stdout.strip()
    container.pid = int(state or 0)
    container.cgroup = CpuCgroup.of(container.pid) if container.pid else None
    if container.pid == 0:
        logs = docker("logs", "--tail", "3", container.id, check=False)
        container.remove()
        raise DockerError(f"image {image} exited at once as {role}, before its network was wired: "
                          f"{(logs.stdout + logs.stderr).strip()[-400:] or '(no output)'}")
    return container


@dataclass(frozen=True)
class CpuCgroup:
    """The CPU accounting of one container: cgroup v1's cpuacct hierarchy where the
    engine uses it (Docker on a hybrid host), else the unified (v2) one."""

    path: Path
    v2: bool

    @classmethod
    def of(cls, pid: int) -> CpuCgroup | None:
        """The cgroup process `pid` is accounted in, or None (no cgroup fs, or it is gone)."""
        try:
            memberships = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
            mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        except OSError:
            return None
        v1 = {m.split()[4]: m.split(" - ")[1].split()[2].split(",") for m in mounts
              if " - cgroup " in m}  # mount point -> super options (the controllers)
        v2 = [m.split()[4] for m in mounts if " - cgroup2 " in m]
        for line in memberships:
            _, controllers, rel = line.split(":", 2)
            if "cpuacct" in controllers.split(","):
                for point, options in v1.items():
                    if "cpuacct" in options and (Path(point) / rel.lstrip("/") / "cpuacct.usage").exists():
                        return cls(Path(point) / rel.lstrip("/"), False)
        for line in memberships:
            _, controllers, rel = line.split(":", 2)
            if controllers == "":
                for point in v2:
                    if (Path(point) / rel.lstrip("/") / "cpu.stat").exists():
                        return cls(Path(point) / rel.lstrip("/"), True)
        return None

    def cpu_s(self) -> float | None:
        """CPU time (user + system) of everything the container ran, s; None once it is gone."""
        try:
            if self.v2:
                stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
                return int(stat["usage_usec"]) / 1e6
            return int((self.path / "cpuacct.usage").read_text()) / 1e9
        except (OSError, KeyError, ValueError):
            return None

    def run_delay_s(self) -> float | None:
        """Time the container's live threads spent runnable but waiting for a CPU (schedstat), s."""
        try:
            tids = (self.path / ("cgroup.threads" if self.v2 else "tasks")).read_text().split()
        except OSError:
            return None
        total, seen = 0, False
        for tid in tids:
            try:
                total += int(Path(f"/proc/{tid}/schedstat").read_text().split()[1])
                seen = True
            except (OSError, IndexError, ValueError):
                continue  # the thread ended meanwhile
        return total / 1e9 if seen else None


def listen_in_netns(ns_path: str, port: int) -> socket.socket:
    """A listening TCP socket on 0.0.0.0:`port` inside the namespace at `ns_path`.

    A socket belongs to the namespace its creating thread was in; a throwaway thread
    enters the namespace so this process's own threads never leave theirs."""
    result: dict[str, object] = {}

    def inside() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            with open(ns_path) as target:
                if libc.setns(target.fileno(), _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns {ns_path}")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("0.0.0.0", port))
            sock.listen(64)
            result["sock"] = sock
        except OSError as e:
            result["error"] = e

    worker = threading.Thread(target=inside, name="ll-netns-listen")
    worker.start()
    worker.join()
    if "error" in result:
        raise DockerError(f"cannot listen on {port} in {ns_path}: {result['error']}")
    return result["sock"]  # type: ignore[return-value]


def sweep_stale() -> list[str]:
    """Removes containers whose owner process is gone (a killed earlier run); returns their names."""
    listed = docker("ps", "--all", "--filter", f"label={OWNER_LABEL}",
                    "--format", f'{{{{.ID}}}} {{{{.Names}}}} {{{{.Label "{OWNER_LABEL}"}}}}', check=False)
    removed = []
    for line in listed.stdout.splitlines():
        cid, name, owner = (line.split() + ["", "", ""])[:3]
        if owner.isdigit() and not netns.pid_alive(int(owner)):
            docker("rm", "--force", "--volumes", cid, check=False)
            removed.append(name)
    return removed
