"""The stacks longlook can drive, read from each endpoint's caps.json.

Each stack lives in harness/endpoints/<name>/ with an executable `run` that follows
docs/endpoints.md and a `caps.json` declaring its version, congestion controllers
(with family and β, so properties know which rules apply) and which contract options
it honours. This module is the one place that knows that layout.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness import rfc

ENDPOINTS_DIR = Path(__file__).resolve().parent
#: The fixed stack names (issue 3's interface); order is the display order.
STACKS = ("aioquic", "picoquic", "quic-go", "quiche", "quinn", "tquic", "s2n-quic", "kwik", "chromium", "firefox", "caddy", "ngtcp2", "tcp")
#: The contract's application protocol (HTTP/0.9 over QUIC), what a caps.json without "alpn" speaks.
DEFAULT_ALPN = ("hq-interop",)


class StackError(ValueError):
    """Unknown stack, unsupported CC or missing build; the message says the fix."""


@dataclass(frozen=True)
class CongestionControl:
    """One CC algorithm of a stack. beta is the multiplicative decrease (None: BBR)."""

    name: str
    family: str
    beta: float | None


@dataclass(frozen=True)
class Stack:
    name: str
    version: str
    directory: Path
    cc: dict[str, CongestionControl]
    default_cc: str
    honours: dict[str, bool] = field(default_factory=dict)
    qlog_format: str | None = None
    #: What the transfer runs over: "udp" (QUIC) or "tcp" (the kernel TCP baseline).
    transport: str = "udp"
    #: What the build produces (relative to the stack's directory), if anything.
    artifact: str | None = None
    #: Deliberately broken controllers (the mutant zoo): selectable by name with
    #: --cc, never offered as a conformant choice (caps.json "mutants").
    mutants: dict[str, CongestionControl] = field(default_factory=dict)
    #: A program and its arguments that replace `run` (harness/testbed/commands.py: an
    #: implementer's own build, with this stack's CC list and qlog dialect).
    command: tuple[str, ...] | None = None
    #: A release other than the pinned one (harness.endpoints.releases): its installed files,
    #: which the endpoint finds first (a Python stack: on PYTHONPATH).
    release_dir: Path | None = None
    #: The contract roles its endpoint takes (a browser is a client only).
    roles: tuple[str, ...] = ("client", "server")
    #: The application protocols (ALPN) its endpoints speak; two ends must share one.
    alpn: tuple[str, ...] = DEFAULT_ALPN
    #: The stack at the other end when none is named and this one cannot take both roles.
    peer: str | None = None
    #: Seconds from the client's start to its first packet, where that is long (a
    #: browser's start-up): examples whose trigger never happened then count toward
    #: Hypothesis' max_examples (harness/pytest_plugin.py, _count_unjudged).
    late_start_s: float = 0.0

    @property
    def label(self) -> str:
        """The name, with the release where it is not the pinned one (aioquic@1.5.0)."""
        return f"{self.name}@{self.version}" if self.release_dir else self.name

    @property
    def run(self) -> Path:
        return self.directory / "run"

    @property
    def argv(self) -> list[str]:
        """What the harness starts inside a namespace."""
        if self.command:
            return list(self.command)
        return [str(self._release_program or self.run)]

    @property
    def _release_program(self) -> Path | None:
        """A compiled release's own program (harness.endpoints.releases), if this is one."""
        program = self.release_dir / "endpoint" if self.release_dir else None
        return program if program is not None and program.exists() else None

    def is_built(self) -> bool:
        """Whether `make setup` produced what `run` needs (a command was checked when it was given)."""
        if self.command:
            return os.access(self.command[0], os.X_OK)
        if self._release_program:
            return os.access(self._release_program, os.X_OK)
        return self.run.exists() and (self.artifact is None or (self.directory / self.artifact).exists())

    def resolve_cc(self, cc: str | None) -> CongestionControl:
        """The CC to use; `module:Factory` is accepted where the stack loads by import path."""
        if cc is None:
            return self.cc[self.default_cc]
        name = {"reno": "newreno"}.get(cc, cc)
        if name in self.cc:
            return self.cc[name]
        if name in self.mutants:
            return self.mutants[name]
        if ":" in cc and self.honours.get("cc_by_import_path"):
            return import_path_cc(cc)
        raise StackError(
            f"{self.name} has no congestion control {cc!r}; choose one of "
            f"{', '.join(sorted(self.cc))}"
            + (" or module:Factory" if self.honours.get("cc_by_import_path") else "")
        )


#: The families whose rules a controller given by import path may claim, with
#: their kLossReductionFactor (harness.rfc).
FAMILY_BETA = rfc.FAMILY_BETA


def import_path_cc(spec: str) -> CongestionControl:
    """The controller named `module:Factory`, judged by the family it claims.

    A factory may set `longlook_family` ("newreno", "cubic" or "bbr") and `longlook_beta`;
    the properties then apply that family's rules to it, as they do to a stock
    controller of the family. Without them (or when the module cannot be imported
    here) the family is "custom" and family-specific properties skip; the endpoint
    imports the module again and fails loudly if it cannot. Importing must have no
    side effects: patches belong in the factory (tests/mutants/_patch.py).
    """
    module_name, _, attr = spec.partition(":")
    # The endpoint sees the caller's PYTHONPATH, the checkout and the working
    # directory (harness/testbed/topology.py); look where it will look.
    extra = [p for p in (str(ENDPOINTS_DIR.parents[1]), os.getcwd()) if p not in sys.path]
    sys.path.extend(extra)
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError):
        return CongestionControl(spec, "custom", None)
    finally:
        for p in extra:
            sys.path.remove(p)
    family = getattr(factory, "longlook_family", None)
    if family == "bbr":  # judged by the BBR properties; no β
        return CongestionControl(spec, "bbr", None)
    if family not in FAMILY_BETA:
        return CongestionControl(spec, "custom", None)
    return CongestionControl(spec, family, float(getattr(factory, "longlook_beta", FAMILY_BETA[family])))


def load(name: str) -> Stack:
    """The stack called `name`, or one of its releases as `name@version` (installed
    on first use, harness.endpoints.releases); StackError names the known ones if it is not one."""
    if "@" in name:
        return _load_release(name)
    if name not in STACKS:
        raise StackError(f"unknown stack {name!r}; known stacks: {', '.join(STACKS)}")
    directory = ENDPOINTS_DIR / name
    caps_path = directory / "caps.json"
    if not caps_path.exists():
        raise StackError(f"stack {name!r} has no {caps_path}; is the checkout complete?")
    try:
        caps = json.loads(caps_path.read_text())
        ccs = {
            k: CongestionControl(k, v["family"], v.get("beta"))
            for k, v in caps["cc"].items()
        }
        return Stack(
            name=name,
            version=str(caps["version"]),
            directory=directory,
            cc=ccs,
            default_cc=caps["default_cc"],
            honours=dict(caps.get("honours", {})),
            qlog_format=caps.get("qlog_format"),
            transport=caps.get("transport", "udp"),
            artifact=caps.get("artifact"),
            mutants={
                k: CongestionControl(k, v["family"], v.get("beta"))
                for k, v in caps.get("mutants", {}).items()
            },
            roles=tuple(caps.get("roles", ("client", "server"))),
            alpn=tuple(caps.get("alpn", DEFAULT_ALPN)),
            peer=caps.get("peer"),
            late_start_s=float(caps.get("late_start_s", 0.0)),
        )
    except (KeyError, TypeError, json.JSONDecodeError) as e:
        raise StackError(f"{caps_path}: malformed capabilities ({e!r}); see docs/endpoints.md") from None


def receiver(stack: Stack, peer: Stack | None, direction: str) -> Stack | None:
    """The stack that receives what `stack` sends in `direction` ("download": `stack`
    is the server; "upload": the client): `peer` where named, else `stack` itself, or
    the stack its caps.json names where it cannot take both roles. None means `stack`
    at both ends. StackError, naming the fix, when `stack` cannot send that way or the
    two ends share no role or application protocol."""
    sending, receiving = ("server", "client") if direction == "download" else ("client", "server")
    if sending not in stack.roles:
        other = "upload" if direction == "download" else "download"
        raise StackError(f"{stack.name} is a {' and '.join(stack.roles)} only, so it sends only in an {other}: "
                         f"judge its sender with --direction {other}"
                         + (f", or judge a server against it with --impl {stack.peer} --{receiving} {stack.name}"
                            if stack.peer and direction == "download" else ""))
    other = peer if peer is not None and peer.label != stack.label else None
    if other is None and receiving not in stack.roles:
        if not stack.peer:
            raise StackError(f"{stack.name} cannot be its own {receiving}; name one with --{receiving}")
        other = load(stack.peer)
    end = other or stack
    if receiving not in end.roles:
        raise StackError(f"{end.name} is a {' and '.join(end.roles)} only and cannot be the {receiving}")
    if not set(stack.alpn) & set(end.alpn):
        speakers = [s.name for s in available() if receiving in s.roles and set(s.alpn) & set(stack.alpn)]
        raise StackError(f"{stack.name} speaks {', '.join(stack.alpn)} and {end.name} {', '.join(end.alpn)}: they "
                         f"share no application protocol; a {receiving} that speaks {stack.alpn[0]}: "
                         f"{', '.join(speakers) or 'none'}")
    return other


def _load_release(spec: str) -> Stack:
    """The pinned stack's capabilities, with the controllers the release ships."""
    import dataclasses

    from harness.endpoints import releases

    name, version = releases.split(spec)
    pinned = load(name)
    if version == releases.pinned_version(name):
        return pinned
    directory = releases.ensure(name, version, log=lambda m: print(f"longlook: {m}", file=sys.stderr))
    ships = set(releases.record(name, version)["controllers"])
    cc = {k: v for k, v in pinned.cc.items() if k in ships}
    default = pinned.default_cc if pinned.default_cc in cc else next(iter(sorted(cc)), pinned.default_cc)
    return dataclasses.replace(pinned, version=version, release_dir=directory, cc=cc, default_cc=default, mutants={})


def available() -> list[Stack]:
    """Every stack whose directory exists, built or not."""
    return [load(n) for n in STACKS if (ENDPOINTS_DIR / n / "caps.json").exists()]
