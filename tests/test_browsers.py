"""Browsers as clients (issue 20): headless Debian chromium (driven by chromedriver)
and firefox-esr (driven over WebDriver BiDi), downloading from aioquic's HTTP/3
server and uploading to it through the emulated link; Chromium's NetLog and
Firefox's neqo qlog read as their logs. The NetLog reader's cases use small NetLogs
built here, in the shape Chromium 156 writes (event names as its constants give them)."""

from __future__ import annotations

import bisect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import skip_or_fail
from harness import endpoints
from harness.endpoints import StackError
from harness.observe import qlog
from harness.observe.events import Metrics, PacketLost, PacketSent
from harness.observe.qlog_raw import QlogError

CLI = [sys.executable, "-m", "harness.cli"]
NAMES = ("QUIC_SESSION", "QUIC_SESSION_PACKET_SENT", "QUIC_SESSION_PACKET_LOST", "QUIC_SESSION_ACK_FRAME_SENT",
         "QUIC_SESSION_STREAM_FRAME_SENT", "QUIC_SESSION_CRYPTO_FRAME_SENT", "QUIC_SESSION_PADDING_FRAME_SENT",
         "QUIC_SESSION_COALESCED_PACKET_SENT", "SOCKET_ALIVE")


def netlog(events: list[tuple[str, dict]], source: int = 7) -> dict:
    ids = {n: 100 + k for k, n in enumerate(NAMES)}
    return {"constants": {"logEventTypes": ids, "timeTickOffset": "1795000000000"},
            "events": [{"type": ids[n], "source": {"id": source, "type": 13}, "phase": 0, "time": "1000",
                        "params": p} for n, p in events]}


def sent(pn: int, t_us: int, level: str = "ENCRYPTION_FORWARD_SECURE", size: int = 1250):
    return ("QUIC_SESSION_PACKET_SENT", {"encryption_level": level, "packet_number": pn, "sent_time_us": t_us,
                                         "size": size, "transmission_type": "NOT_RETRANSMISSION"})


CRYPTO = ("QUIC_SESSION_CRYPTO_FRAME_SENT", {"data_length": 900, "encryption_level": "ENCRYPTION_INITIAL", "offset": 0})
ACK = ("QUIC_SESSION_ACK_FRAME_SENT", {"largest_observed": 0, "smallest_observed": 0, "missing_packets": []})
STREAM = ("QUIC_SESSION_STREAM_FRAME_SENT", {"fin": False, "length": 1200, "offset": 0, "stream_id": 0})


def read(tmp_path: Path, doc: dict | bytes):
    path = tmp_path / "chromium.netlog.json"
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return qlog.read_traces(path, "chromium", "server", None)


def test_a_netlog_reads_as_sends_and_losses_with_frames_and_spaces(tmp_path):
    doc = netlog([
        ("QUIC_SESSION", {"host": "server.longlook.test"}),
        CRYPTO, sent(1, 5_000_000, "ENCRYPTION_INITIAL", 1003),
        # Chromium logs an Initial datagram's frames again when it pads and sends it:
        # not frames of the next packet, which has only its ACK.
        CRYPTO, ("QUIC_SESSION_PADDING_FRAME_SENT", {"num_padding_bytes": 247}),
        ("QUIC_SESSION_COALESCED_PACKET_SENT", {"info": "total_length: 1250"}),
        ACK, sent(2, 5_010_000, "ENCRYPTION_INITIAL", 42),
        STREAM, sent(3, 5_020_500), STREAM, sent(4, 5_021_000),
        ("QUIC_SESSION_PACKET_LOST", {"packet_number": 3, "detection_time_us": 5_090_000,
                                      "transmission_type": "NOT_RETRANSMISSION"}),
        ("SOCKET_ALIVE", {}),
    ])
    (trace,) = read(tmp_path, doc)
    sends = trace.of(PacketSent)
    assert [(p.pn, p.space, p.size, p.ack_eliciting) for p in sends] == [
        (1, "initial", 1003, True), (2, "initial", 42, False), (3, "application", 1250, True),
        (4, "application", 1250, True)]
    (lost,) = trace.of(PacketLost)
    assert (lost.pn, lost.space, lost.trigger) == (3, "application", None)
    # µs of CLOCK_MONOTONIC, kept to the µs (no link start given: the log's own origin).
    assert sends[2].t_us - sends[0].t_us == 20_500 and lost.t_us - sends[2].t_us == 69_500
    assert any("NetLog read as qlog" in n and "server.longlook.test" in n for n in trace.notes)


def chromium_lines(doc: dict) -> str:
    """The NetLog as Chromium writes it: constants, then one event per line."""
    head = json.dumps({"constants": doc["constants"]})[:-1] + ',\n"events": [\n'
    return head + "".join(json.dumps(e) + ",\n" for e in doc["events"])


@pytest.mark.parametrize("cut", ["after an event", "inside an event"])
def test_a_netlog_cut_short_is_read_and_marked_partial(tmp_path, cut):
    text = chromium_lines(netlog([sent(1, 1000), sent(2, 2000), sent(3, 3000)]))  # what a killed browser leaves
    if cut == "inside an event":
        text = text[: text.rindex('"sent_time_us"')]
    (trace,) = read(tmp_path, text.encode())
    assert trace.partial and [p.pn for p in trace.of(PacketSent)] == ([1, 2, 3] if cut == "after an event" else [1, 2])
    assert any("cut short" in n for n in trace.notes)


@pytest.mark.parametrize("content,needle", [
    (json.dumps(netlog([("SOCKET_ALIVE", {})])).encode(), "no QUIC packet sent"),
    (b'{"constants": {"logEventTypes": {}},\n"events": [\n{"type": 1, ', "no QUIC packet sent"),
    (b'{"constants": 5, "events": []}', "logEventTypes"),
    (b'{"constants": {"logEventTypes": {"A": 1}}, "events": [ this is not json', "not a readable NetLog"),
])
def test_a_bad_netlog_is_one_error_naming_the_file(tmp_path, content, needle):
    with pytest.raises(QlogError, match=needle) as e:
        read(tmp_path, content)
    assert "chromium.netlog.json" in str(e.value)


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
def test_a_browser_is_a_client_paired_with_an_h3_server(browser):
    b, aioquic, quinn = (endpoints.load(n) for n in (browser, "aioquic", "quinn"))
    assert b.roles == ("client",) and b.alpn == ("h3",) and "h3" in aioquic.alpn
    assert endpoints.receiver(b, None, "upload").name == "aioquic"
    assert endpoints.receiver(aioquic, b, "download").name == browser
    assert endpoints.receiver(quinn, None, "download") is None
    with pytest.raises(StackError, match=f"client only.*--direction upload.*--impl aioquic --client {browser}"):
        endpoints.receiver(b, None, "download")
    with pytest.raises(StackError, match="share no application protocol.*speaks h3: aioquic"):
        endpoints.receiver(b, quinn, "upload")
    with pytest.raises(StackError, match="share no application protocol"):
        endpoints.receiver(quinn, b, "download")


@pytest.mark.parametrize("args,needle", [
    (["--impl", "chromium"], "chromium is a client only"),
    (["--impl", "quiche", "--client", "chromium"], "share no application protocol"),
])
def test_a_pair_chromium_cannot_make_is_one_clear_line(args, needle, tmp_path):
    r = subprocess.run([*CLI, "transfer", *args, "--rate", "10mbit", "--rtt", "20ms", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("browser,env,needle", [
    ("chromium", {"ROLE": "server"}, "client only"),
    ("chromium", {"ROLE": "client", "LL_CC": "vegas"}, "LL_CC=vegas unsupported"),
    ("chromium", {"ROLE": "client", "LL_INITIAL_WINDOW": "10"}, "initial window is 32"),
    ("firefox", {"ROLE": "server"}, "client only"),
    ("firefox", {"ROLE": "client", "LL_CC": "bbr"}, "LL_CC=bbr unsupported (firefox offers cubic, newreno, reno)"),
    ("firefox", {"ROLE": "client", "LL_MAX_DATAGRAM_SIZE": "1200"}, "sends 1252 B packets"),
    ("firefox", {"ROLE": "client", "LL_CERTS": "/nonexistent"}, "cert.pem is missing"),
])
def test_the_endpoint_refuses_what_the_browser_cannot_do_with_127(browser, env, needle, tmp_path):
    run = endpoints.load(browser).run
    r = subprocess.run([str(run)], env={**os.environ, "REQUESTS": "https://198.18.0.1:4433/x",
                                        "LL_CERTS": str(tmp_path), **env},
                       capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 127 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


BINARIES = {"chromium": ("chromium", "chromedriver"), "firefox": ("firefox-esr",)}


def _needs(browser: str):
    missing = [b for b in BINARIES[browser] if not shutil.which(b)]
    if missing:
        skip_or_fail(f"{', '.join(missing)} not installed (make setup installs them)")


def _no_browser_left(out: Path):
    """No browser of this run is left: the browser's profile lies under `out` (beside
    the run's logs), so every browser process of the run names `out` on its command
    line (and the endpoint's does not, so a match is a browser)."""
    left = subprocess.run(["pgrep", "-f", str(out)], capture_output=True, text=True, check=False).stdout
    assert not left.strip(), f"processes of the run outlived it: {left}"


#: The flights whose first send may show the log on the link's clock. Eight, not four:
#: in a CI run of `make test` on two busy cores the first four of Firefox's lagged
#: 4.9-139 ms behind its log.
FLIGHTS = 8


def _log_clock_is_the_links(trace, arrivals_us: list[float]) -> None:
    """The log's sends sit on the link's clock. Not late: the link saw nothing of the
    sender before the log's first send. Not early: some flight's first send (one 10 ms
    or more after the one before) met the link within 3 ms. One flight, not every one:
    on a loaded machine a browser's write can trail its log by 10 ms (the first
    Initial, while the browser is still starting up)."""
    sends = [p.t_us for p in trace.of(PacketSent)]
    arrivals = sorted(arrivals_us)
    assert arrivals[0] >= sends[0], f"the link saw the sender at {arrivals[0]} µs, before its log's first send"
    starts = [t for before, t in zip([float("-inf"), *sends], sends) if t - before >= 10_000][:FLIGHTS]
    lags = [arrivals[i] - t for t in starts if (i := bisect.bisect_left(arrivals, t)) < len(arrivals)]
    assert lags and min(lags) < 3_000, f"no flight's first send met the link within 3 ms: {lags} µs"


@pytest.mark.netns
@pytest.mark.parametrize("browser", ["chromium", "firefox"])
def test_a_browser_uploads_through_a_lossy_link_and_its_log_is_its_trace(netns_ready, tmp_path, browser):
    """The browser's own sender (CUBIC) is the one judged: the bytes arrive whole at
    aioquic's h3 server, the trace comes from the browser's log on the link's clock,
    and the capture decrypts with the key log the browser wrote."""
    _needs(browser)
    out = tmp_path / "up"
    r = subprocess.run([*CLI, "transfer", "--impl", browser, "--direction", "upload", "--bytes", "1MB",
                        "--rate", "20mbit", "--rtt", "40ms", "--loss", "0.02", "--out", str(out)],
                       capture_output=True, text=True, timeout=240, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{browser} cubic (upload) to aioquic's server" in r.stdout
    result = json.loads((out / "result.json").read_text())
    assert result["ok"] and result["direction"] == "upload" and result["peer_stack"] == "aioquic"
    version = json.loads((out / "server" / "app.ndjson").read_text().splitlines()[0])
    assert version["stack"] == browser
    (trace,) = qlog.read_run(out, browser)["server"]
    assert not trace.partial, trace.notes
    sends = [p for p in trace.of(PacketSent) if p.space == "application"]
    assert sum(p.size for p in sends) > 1_000_000 and trace.of(PacketLost), "2% loss: the browser declared losses"
    link = [json.loads(line) for line in (out / "link.ndjson").read_text().splitlines()[1:]]
    flows = {r["flow"] for r in link if "flow" in r}
    # The transfer's flow each way, and at most an ICMP error between the same two
    # hosts: a datagram of the server's that arrives after the browser closed its
    # socket draws a port unreachable (1 of the runs of 2026-11-29), which is the
    # transfer's own ending, not background traffic.
    udp = {f for f in flows if f.startswith("udp ")}
    hosts = {end.rsplit(":", 1)[0] for f in udp for end in f.split(" ", 1)[1].split(">")}
    stray = {f for f in flows - udp
             if not (f.startswith("icmp ") and {e.rsplit(":", 1)[0] for e in f.split(" ", 1)[1].split(">")} <= hosts)}
    assert len(udp) == 2 and not stray, \
        f"the transfer's flow only, each way: no background traffic crossed the link: {flows}"
    _log_clock_is_the_links(trace, [r["arr_us"] for r in link if r.get("dir") == "s2c"])
    windows = [m.congestion_window for m in trace.of(Metrics) if m.congestion_window]
    if browser == "chromium":  # its NetLog has no window: no plot, and it says so
        assert not windows and "no cwnd plot" in r.stdout
    else:  # neqo logs its window: plotted as any stack's
        assert windows and (out / "report" / "firefox-client-cwnd.png").exists()
    from harness.observe.groundtruth import read_log
    from harness.observe.wire import read_wire

    gt = read_log(out / "link.ndjson")
    view = read_wire(out / "pcap" / "server.pcap", [out / "server" / "keys.log"], gt.header["start_unix_ns"],
                     server_addrs={result["transfer"]["addr"]}, server_side_addrs=gt.server_side_addrs())
    view.check()  # every packet decrypted with the key log the browser wrote
    data = sum(f.length for d in view.datagrams if d.direction == "s2c" for p in d.packets for f in p.frames
               if f.name == "stream")
    assert data >= 1_000_000
    _no_browser_left(out)


@pytest.mark.netns
@pytest.mark.parametrize("browser,native", [("chromium", "RENO"), ("firefox", "cc_algorithm=0")])
def test_aioquic_serves_a_browser_over_http3(netns_ready, tmp_path, browser, native):
    """A download: aioquic's server (judged) sends over h3 to the browser, which writes
    what it received, byte for byte; NewReno is asked of the browser's client too."""
    _needs(browser)
    out = tmp_path / "down"
    r = subprocess.run([*CLI, "transfer", "--impl", "aioquic", "--cc", "newreno", "--client", browser,
                        "--bytes", "600KB", "--streams", "2", "--rate", "20mbit", "--rtt", "40ms", "--loss", "0.01",
                        "--out", str(out)], capture_output=True, text=True, timeout=240, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"to {browser}'s client" in r.stdout
    applog = [json.loads(line) for line in (out / "client" / "app.ndjson").read_text().splitlines()]
    assert applog[0]["stack"] == browser and applog[0]["native_cc"] == native
    done = [e for e in applog if e.get("event") == "request_done"]
    assert sorted(e["bytes"] for e in done) == [300_000, 300_000]
    traces = qlog.read_run(out, "aioquic")
    assert traces["client"][0].stack == browser and traces["server"][0].stack == "aioquic"
    assert list((out / "report").glob("aioquic-server-cwnd.png"))
    _no_browser_left(out)


def test_a_browser_loads_the_origin_again_until_it_answers(monkeypatch):
    """A schedule that holds up the handshake makes a browser give up and show an
    error page; the endpoint loads the page again (LL_TIMEOUT_S bounds it), as the
    contract's other clients keep trying."""
    sys.path.insert(0, str(endpoints.ENDPOINTS_DIR / "browser"))
    import page

    monkeypatch.setattr(page, "RETRY_S", 0.0)
    titles, navigations = iter(["server.longlook.test", "Problem loading page", "longlook"]), []

    class Fake:
        def call(self, function, args):
            assert function == page.TITLE
            return next(titles)

    page.load_origin(Fake(), lambda: navigations.append(1))
    assert len(navigations) == 3


def test_a_browser_endpoint_is_one_line_on_failure(tmp_path):
    """A browser that cannot reach the server within LL_TIMEOUT_S: exit 1, one line
    (nothing listens on the discard port of the loopback it is sent to)."""
    if not shutil.which("chromium"):
        skip_or_fail("chromium is not installed (make setup installs it)")
    from harness.testbed.certs import write_certs

    write_certs(tmp_path)
    r = subprocess.run([str(endpoints.load("chromium").run)], env={
        **os.environ, "ROLE": "client", "REQUESTS": "https://127.0.0.1:9/x", "LL_CERTS": str(tmp_path),
        "LL_TIMEOUT_S": "4"}, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 1 and "gave up after LL_TIMEOUT_S=4" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_late_starting_clients_unexercised_examples_count_toward_max_examples():
    """For a browser (caps late_start_s), a not-exercised example ends its call normally
    (Hypothesis counts it, as under outcomes.rare_trigger) instead of being rejected and
    hunted past; for any other stack it stays a rejection. Other outcomes pass through."""
    from types import SimpleNamespace

    from harness.pytest_plugin import _count_unjudged
    from harness.verdict.outcomes import NotExercised

    def inner(target, why):
        if why == "unexercised":
            raise NotExercised("the blackhole struck before the first packet")
        if why == "failed":
            raise AssertionError("a deviation")
        return "judged"

    test = SimpleNamespace(hypothesis=SimpleNamespace(inner_test=inner))
    _count_unjudged(test)
    _count_unjudged(test)  # once per function, whatever the number of its cases
    wrapped = test.hypothesis.inner_test
    assert wrapped.__wrapped__ is inner
    firefox, aioquic = (SimpleNamespace(stack=endpoints.load(n)) for n in ("firefox", "aioquic"))
    assert firefox.stack.late_start_s > 0 and aioquic.stack.late_start_s == 0
    assert wrapped(target=firefox, why="unexercised") is None
    with pytest.raises(NotExercised):
        wrapped(target=aioquic, why="unexercised")
    with pytest.raises(AssertionError):
        wrapped(target=firefox, why="failed")
    assert wrapped(target=firefox, why="ok") == "judged"
