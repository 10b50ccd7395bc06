#!/usr/bin/env python3
"""Coverage-guided fuzzing (atheris) of the files users hand the suite, up to the
clear-error boundary: each reader either returns or raises its own documented error
naming the file, never anything else (a traceback from deep inside).

  qlog-STACK   a qlog file read as STACK's dialect (read_traces): QlogError
  keylog       an NSS key log (read_keylog), then a real capture decrypted with it
               (read_wire): WireError
  pcap         a capture decrypted with its real key log (read_wire): WireError
  results      a results file (harness.results.store.read) and the report's view of
               its records (matrix rows, cells, counts): ResultsError

Schedules are fuzzed where they are checked, in the emulator's Rust parser
(harness/emulator/fuzz, target schedule_parse).

    .venv/bin/python tests/fuzz/inputs.py pcap --runs 1000000        # prints the count and the outcome
    .venv/bin/python tests/fuzz/inputs.py qlog-quinn --seconds 60     # a time budget instead
    .venv/bin/python tests/fuzz/inputs.py --list

Inputs start from tests/fuzz/corpus/TARGET (seeded from tests/fixtures; new inputs
that reach new code are added there unless --no-save); a crash writes crash-* in the
working directory and exits non-zero, as libFuzzer does.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

FIXTURES = ROOT / "tests" / "fixtures"
DIALECTS = ("aioquic", "picoquic", "quic-go", "quiche", "quinn")
TARGETS = (*(f"qlog-{s}" for s in DIALECTS), "keylog", "pcap", "results")
#: A real capture and its key log (quic-go's server side), for keylog and pcap.
WIRE = FIXTURES / "wire" / "quic-go"


def _scratch() -> Path:
    """A file in memory-backed storage where there is one: every case writes it."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
    d = Path(tempfile.mkdtemp(prefix="ll-fuzz-", dir=base))
    return d / "input"


def target(name: str):
    """The one-input test function of `name`: bytes in, nothing out; raises only
    what is not the reader's own error."""
    scratch = _scratch()
    if name.startswith("qlog-"):
        from harness.observe.qlog import read_traces
        from harness.observe.qlog_raw import QlogError

        stack = name.removeprefix("qlog-")

        def test(data: bytes) -> None:
            scratch.write_bytes(data)
            try:
                read_traces(scratch, stack, "server", 0)
            except QlogError as e:
                assert str(scratch) in str(e), f"the error does not name the file: {e}"
        return test
    if name in ("keylog", "pcap"):
        from harness.observe.quic_frames import read_keylog
        from harness.observe.wire import WireError, read_wire

        keys = read_keylog(WIRE / "keys.log")
        # The keylog target decrypts the capture's first 16 packets only: its Initial
        # and Handshake packets and 12 of 1-RTT, every key the log names used, at
        # 2.6 ms a case (the first 40 took 4.3 ms, the whole transfer seconds).
        pcap = scratch.with_name("head.pcap")
        pcap.write_bytes(_pcap_head(WIRE / "pcap" / "server.pcap", 16))

        def test(data: bytes) -> None:
            scratch.write_bytes(data)
            try:
                if name == "keylog":
                    read_wire(pcap, read_keylog(scratch), side="server")
                else:
                    read_wire(scratch, keys, side="server")
            except WireError:
                pass
        return test
    if name == "results":
        from harness.report.site import Cell, group_of, row_label, row_of
        from harness.results.store import ResultsError, read

        def test(data: bytes) -> None:
            scratch.write_bytes(data)
            try:
                records = read([scratch]).records
            except ResultsError as e:
                assert str(scratch) in str(e), f"the error does not name the file: {e}"
                return
            for rec in records:  # what the report reads of each record
                cell = Cell(rec["property"], row_of(rec), [rec])
                cell.outcome, cell.judged, cell.findings, cell.href
                row_label(cell.row)
                group_of(rec.get("sections") or [])
        return test
    raise SystemExit(f"unknown target {name!r}; one of {', '.join(TARGETS)}")


def _pcap_head(path: Path, records: int) -> bytes:
    """The pcap file at `path` cut after its first `records` packets."""
    import struct

    data = path.read_bytes()
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    pos = 24
    for _ in range(records):
        if pos + 16 > len(data):
            break
        pos += 16 + struct.unpack(endian + "I", data[pos + 8:pos + 12])[0]
    return data[:pos]


def seeds(name: str) -> list[Path]:
    """The fixture files a target's corpus starts from."""
    if name.startswith("qlog-"):
        stack = name.removeprefix("qlog-")
        return sorted(p for p in (FIXTURES / "qlog" / stack).rglob("*") if p.is_file() and "qlog" in p.parts
                      and p.stat().st_size < 200_000)[:4]
    if name == "keylog":
        return [WIRE / "keys.log"]
    if name == "pcap":
        return [WIRE / "pcap" / "server.pcap"]
    return sorted((FIXTURES / "results").glob("*.ndjson"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", nargs="?", choices=TARGETS)
    ap.add_argument("--runs", type=int, default=100_000, help="cases to run (default 100000)")
    ap.add_argument("--seconds", type=int, help="stop after this long instead, whatever the count")
    ap.add_argument("--list", action="store_true", help="list the targets")
    ap.add_argument("--no-save", action="store_true", help="do not add new inputs to the corpus")
    ap.add_argument("--minimize", action="store_true",
                    help="shrink the target's corpus to the inputs that keep its coverage (libFuzzer's -merge)")
    # libFuzzer re-executes this program for a merge's inner runs with flags of its
    # own (-merge_inner=1, …): those pass through to it.
    a, passthrough = ap.parse_known_args(argv)
    if a.list or not a.target:
        print("\n".join(TARGETS))
        return 0
    try:
        import atheris
    except ImportError:
        raise SystemExit("atheris is not installed: run `make setup` (requirements.txt pins it)") from None
    corpus = HERE / "corpus" / a.target
    corpus.mkdir(parents=True, exist_ok=True)
    for seed in seeds(a.target):
        dest = corpus / f"seed-{seed.parent.name}-{seed.name}"
        if not dest.exists():
            dest.write_bytes(seed.read_bytes())
    with atheris.instrument_imports():
        test = target(a.target)
    if passthrough:
        atheris.Setup([sys.argv[0], *passthrough], test)
        atheris.Fuzz()
        return 0
    if a.minimize:
        return _minimize(atheris, test, corpus, a.target)
    dirs = [str(corpus)] if not a.no_save else [tempfile.mkdtemp(prefix="ll-fuzz-corpus-"), str(corpus)]
    limit = [f"-max_total_time={a.seconds}"] if a.seconds else [f"-runs={a.runs}"]
    args = [sys.argv[0], *limit, "-max_len=65536", "-print_final_stats=1", *dirs]
    atheris.Setup(args, test)
    atheris.Fuzz()
    return 0


def _minimize(atheris, test, corpus: Path, name: str) -> int:
    """Merges the corpus into a fresh directory (only inputs that add coverage go in),
    then puts that in its place; seeds and crash reproducers are kept whatever.
    libFuzzer runs the merge in child processes of argv[0]: a wrapper that runs this
    target under this interpreter."""
    import shutil

    kept = Path(tempfile.mkdtemp(prefix="ll-fuzz-min-"))
    wrapper = kept.with_name(kept.name + ".sh")
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" {name} "$@"\n')
    wrapper.chmod(0o755)
    pid = os.fork()
    if pid == 0:  # libFuzzer exits the process when the merge is done
        atheris.Setup([str(wrapper), "-merge=1", "-max_len=65536", str(kept), str(corpus)], test)
        atheris.Fuzz()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"merging {corpus} failed (exit {os.waitstatus_to_exitcode(status)})")
    for f in corpus.iterdir():
        if f.name.startswith(("seed-", "crash-")):
            shutil.copy(f, kept / f.name)
    before = len(list(corpus.iterdir()))
    shutil.rmtree(corpus)
    shutil.move(str(kept), str(corpus))
    wrapper.unlink()
    print(f"{corpus}: {before} inputs → {len(list(corpus.iterdir()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
