"""What the application does over the link: the objects the client fetches, how, and
which flows compete with it. Half of what an example is, beside the schedule."""

from __future__ import annotations

from dataclasses import dataclass


#: Which way the objects go: the server sends them (download) or the client (upload).
DIRECTIONS = ("download", "upload")


@dataclass(frozen=True)
class TransferPlan:
    """What the client fetches: one object per size, fetched per `testcase`."""

    sizes: tuple[int, ...] = (1_000_000,)
    #: transfer (sequential), multiplexing (parallel), appidle (sequential + think time)
    testcase: str = "multiplexing"
    think_ms: int = 0
    #: Seed of the objects' contents (deterministic bytes, so reruns are identical).
    seed: int = 0
    #: Competing kernel TCP flows in the same (server → client) direction, started
    #: a warm-up (the testbed's TCP_WARMUP_S) before the QUIC client and stopped when it is done.
    tcp_flows: int = 0
    tcp_cc: str = "cubic"
    #: QUIC clients fetching the same objects at once (each its own connection):
    #: 1 is the transfer alone; more make QUIC flows of one stack compete.
    quic_flows: int = 1
    #: "download" (the server sends the objects) or "upload" (the client sends them:
    #: docs/endpoints.md, LL_DIRECTION); the sender is the stack under test either way.
    direction: str = "download"
    #: Extra subject alternative names' bytes in the server's certificate (0: none),
    #: so that its first flight spans several datagrams: the client can then hold an
    #: acknowledged Initial and nothing else in flight (RFC 9002 §6.2.2.1's deadlock).
    cert_padding: int = 0
    #: A competing download by another QUIC stack ("stack" or "stack:cc") from its
    #: own server on the same link, its client started with the transfer's (real time,
    #: local backend): pairwise fairness, as Prudentia measures it. None: no rival.
    rival: str | None = None
    #: A ceiling on the sender's congestion window, bytes (0: none): the endpoint
    #: contract's LL_MAX_WINDOW, for stacks whose endpoint declares it (caps.json
    #: honours.max_window; any other refuses the run as unsupported). A sender
    #: setting, not the application's, but part of what one example runs, so a
    #: replay runs it too; trace validation gives it to the model as MaxWindow.
    window_cap: int = 0
    #: The receiver holds each acknowledgement this many ms after the first
    #: ack-eliciting packet it covers arrived, and reports the wait in its ACK Delay
    #: (0: its own timing). Above its max_ack_delay it reports delays RFC 9002 §5.3
    #: tells the sender to cap: a receiver setting (LL_ACK_HOLD_MS), for receivers
    #: whose endpoint declares it (caps.json honours.ack_hold); any other refuses
    #: the run as unsupported.
    ack_hold_ms: int = 0

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction {self.direction!r}: one of {', '.join(DIRECTIONS)}")


@dataclass(frozen=True)
class Flow:
    """One flow of a run, named by its listening end as the emulator's ground truth
    names it: the run says which flow is the transfer and which compete with it, so
    that no verdict guesses from a port number (Docker and interop-runner commands
    serve on 443, our own endpoints on 4433)."""

    #: "udp" (QUIC) or "tcp" (the kernel TCP endpoint, or a competitor).
    proto: str
    #: The host whose port is fixed: "server" (the transfer's server) or "client"
    #: (the receiver of a competing iperf3 flow, which listens on the client's host).
    listener: str
    addr: str
    port: int

    def to_json(self) -> dict:
        return {"proto": self.proto, "listener": self.listener, "addr": self.addr, "port": self.port}

    @classmethod
    def from_json(cls, d: dict) -> Flow:
        return cls(str(d["proto"]), str(d["listener"]), str(d["addr"]), int(d["port"]))
