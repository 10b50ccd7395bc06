"""Small traffic endpoints for the emulator's integration tests.

Run inside a namespace (``ip netns exec NS python traffic.py SUBCOMMAND ...``).
Receivers print ``ready`` on stdout once bound, so the test knows when to start
the sender. Times are CLOCK_MONOTONIC nanoseconds (``time.monotonic_ns``),
which all processes on the machine share, so a sender's and a receiver's
stamps can be subtracted.

UDP datagrams carry a header ``!IQQ``: sequence number, send time in ns on
CLOCK_MONOTONIC and on CLOCK_REALTIME. The receiver also keeps the kernel's
receive timestamp (SO_TIMESTAMPNS, CLOCK_REALTIME): it is taken when the
emulator writes the packet, so it measures the link without the receiver's own
scheduling delay, which dominates on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import socket
import struct
import sys
import time

HEADER = struct.Struct("!IQQ")
TIMESPEC = struct.Struct("@qq")
# Python's socket module lacks the constant; 35 is Linux's value (asm-generic,
# x86_64 and arm64), where the cmsg type equals the option.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def ready() -> None:
    """Tell the parent test that the socket is bound."""
    print("ready", flush=True)


def udp_recv(args: argparse.Namespace) -> None:
    """Record datagrams until ``count`` arrived or none for ``idle_s`` after the first."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((args.bind, args.port))
    sock.settimeout(args.first_s)
    ready()
    received = []
    while len(received) < args.count:
        try:
            data, ancillary, _, _ = sock.recvmsg(65535, socket.CMSG_SPACE(TIMESPEC.size))
        except socket.timeout:
            break
        sock.settimeout(args.idle_s)
        recv_ns = time.monotonic_ns()
        seq, send_ns, send_real_ns = HEADER.unpack_from(data)
        received.append({"seq": seq, "send_ns": send_ns, "recv_ns": recv_ns, "size": len(data),
                         "send_real_ns": send_real_ns, "kernel_real_ns": kernel_time(ancillary)})
    with open(args.out, "w") as out:
        json.dump({"received": received}, out)


def kernel_time(ancillary) -> int | None:
    """Return the SO_TIMESTAMPNS receive time (ns, CLOCK_REALTIME) from ``ancillary``."""
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            seconds, nanos = TIMESPEC.unpack_from(value)
            return seconds * 1_000_000_000 + nanos
    return None


def udp_send(args: argparse.Namespace) -> None:
    """Send ``count`` numbered datagrams paced at ``interval_us`` from a fixed port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", args.sport))
    padding = bytes(max(0, args.size - HEADER.size))
    start = time.monotonic_ns()
    for seq in range(args.count):
        # Absolute send times, so a late wake-up does not shift later packets.
        due = start + seq * args.interval_us * 1000
        while (wait := due - time.monotonic_ns()) > 0:
            time.sleep(wait / 1e9)
        stamp = HEADER.pack(seq, time.monotonic_ns(), time.time_ns())
        sock.sendto(stamp + padding, (args.dest, args.port))


def udp_echo(args: argparse.Namespace) -> None:
    """Echo every datagram back until idle for ``idle_s`` after the first."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((args.bind, args.port))
    sock.settimeout(args.first_s)
    ready()
    while True:
        try:
            data, peer = sock.recvfrom(65535)
        except socket.timeout:
            return
        sock.settimeout(args.idle_s)
        sock.sendto(data, peer)


def udp_ping(args: argparse.Namespace) -> None:
    """Send ``count`` pings one at a time; print JSON with each round-trip time (ns)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(args.timeout_s)
    rtts = []
    for seq in range(args.count):
        sent = time.monotonic_ns()
        sock.sendto(HEADER.pack(seq, sent, time.time_ns()), (args.dest, args.port))
        try:
            data = sock.recv(65535)
        except socket.timeout:
            rtts.append(None)
            continue
        echoed = HEADER.unpack_from(data)[0]
        rtts.append(time.monotonic_ns() - sent if echoed == seq else None)
    json.dump({"rtt_ns": rtts}, sys.stdout)


def payload(n_bytes: int, seed: int) -> bytes:
    """Return ``n_bytes`` of reproducible pseudo-random data."""
    return random.Random(seed).randbytes(n_bytes)


def tcp_recv(args: argparse.Namespace) -> None:
    """Accept one connection, read to EOF, write byte count and sha256."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((args.bind, args.port))
    server.listen(1)
    server.settimeout(args.first_s)
    ready()
    conn, _ = server.accept()
    conn.settimeout(args.idle_s)
    digest, total = hashlib.sha256(), 0
    while chunk := conn.recv(1 << 16):
        digest.update(chunk)
        total += len(chunk)
    with open(args.out, "w") as out:
        json.dump({"bytes": total, "sha256": digest.hexdigest()}, out)


def tcp_send(args: argparse.Namespace) -> None:
    """Connect, send ``bytes`` of seeded data, print byte count, sha256 and duration."""
    data = payload(args.bytes, args.seed)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(args.timeout_s)
    if args.cc:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, args.cc.encode())
    sock.connect((args.dest, args.port))
    start = time.monotonic_ns()
    sock.sendall(data)
    sock.shutdown(socket.SHUT_WR)
    sock.recv(1)  # wait for the receiver's close, so the transfer is complete
    elapsed = time.monotonic_ns() - start
    json.dump({"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
               "elapsed_ns": elapsed}, sys.stdout)


def parser() -> argparse.ArgumentParser:
    """Build the command-line parser, one subcommand per endpoint."""
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="command", required=True)
    for name, func in (("udp-recv", udp_recv), ("udp-echo", udp_echo), ("tcp-recv", tcp_recv)):
        p = sub.add_parser(name)
        p.set_defaults(func=func)
        p.add_argument("--bind", required=True)
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--idle-s", type=float, default=3.0)
        if name != "udp-echo":
            p.add_argument("--out", required=True)
        # The first packet may be slow: the peer's process start can take a
        # second on a loaded machine.
        p.add_argument("--first-s", type=float, default=15.0)
        if name == "udp-recv":
            p.add_argument("--count", type=int, required=True)
    for name, func in (("udp-send", udp_send), ("udp-ping", udp_ping), ("tcp-send", tcp_send)):
        p = sub.add_parser(name)
        p.set_defaults(func=func)
        p.add_argument("--dest", required=True)
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--count", type=int, default=10)
        p.add_argument("--timeout-s", type=float, default=2.0)
    send = sub.choices["udp-send"]
    send.add_argument("--sport", type=int, required=True)
    send.add_argument("--interval-us", type=int, default=1000)
    send.add_argument("--size", type=int, default=200)
    tcp = sub.choices["tcp-send"]
    tcp.add_argument("--bytes", type=int, required=True)
    tcp.add_argument("--seed", type=int, default=1)
    tcp.add_argument("--cc", help="TCP congestion control (cubic, reno, bbr); default: the system's")
    return top


if __name__ == "__main__":
    arguments = parser().parse_args()
    arguments.func(arguments)
