"""The initial-window property's rule (RFC 9002 §7.2): the recommended window lies
between 10 datagrams of QUIC's smallest size and min(10 × mds, max(14720, 2 × mds))
for the largest datagram the sender sent, and the window judged is the one logged
before anything could be acknowledged."""

from __future__ import annotations

from harness.observe.events import Metrics, PacketAcked, PacketSent, Trace
from properties.test_slow_start import first_window_before_any_ack, initial_window_bounds


def _trace(*events) -> Trace:
    return Trace(stack="test", vantage="server", events=list(events), source="test")


def test_bounds_follow_the_datagram_size():
    assert initial_window_bounds(1200) == (12000, 12000)
    assert initial_window_bounds(1252) == (12000, 12520)
    # 10 × 1500 = 15000 is above 14720: the cap applies.
    assert initial_window_bounds(1500) == (12000, 14720)
    # Jumbo datagrams: twice the size is above 14720.
    assert initial_window_bounds(9000) == (12000, 18000)
    # A capture that saw only small datagrams still allows QUIC's smallest size.
    assert initial_window_bounds(600) == (12000, 12000)


def test_the_well_known_windows_are_judged_as_the_rfc_says():
    low, high = initial_window_bounds(1252)
    assert low <= 12520 <= high          # aioquic: 10 × 1252
    assert low <= 12000 <= high          # quinn, quiche: 10 × 1200
    assert not 32 * 1252 <= high         # 32 datagrams
    assert not 10 * 1536 <= high         # 10 datagrams of a size never sent


def test_a_window_logged_before_the_first_send_is_the_initial_one():
    trace = _trace(Metrics(t_us=10.0, congestion_window=12000), PacketSent(t_us=10.0, pn=0),
                   PacketAcked(t_us=50.0, pn=0), Metrics(t_us=50.0, congestion_window=13200))
    assert first_window_before_any_ack(trace) == (10.0, 12000)


def test_a_window_logged_after_sends_but_before_any_ack_is_the_initial_one():
    trace = _trace(PacketSent(t_us=10.0, pn=0), Metrics(t_us=11.0, congestion_window=12000),
                   PacketAcked(t_us=50.0, pn=0))
    assert first_window_before_any_ack(trace) == (11.0, 12000)


def test_a_window_first_logged_after_an_acknowledgment_is_not_judged():
    # It may already have grown by the bytes acknowledged: not the initial window.
    trace = _trace(PacketSent(t_us=10.0, pn=0), PacketAcked(t_us=50.0, pn=0),
                   Metrics(t_us=50.0, congestion_window=13200))
    assert first_window_before_any_ack(trace) is None
    # Without acknowledgments in the log either, nothing shows it came before one.
    assert first_window_before_any_ack(_trace(PacketSent(t_us=10.0, pn=0),
                                              Metrics(t_us=20.0, congestion_window=12000))) is None
    assert first_window_before_any_ack(_trace(PacketSent(t_us=10.0, pn=0))) is None


# --- the floor the wire puts on a window no log gives (a browser's) -----------------

#: Each fixture stack's initial window as its own qlog logs it before its first send
#: (the fixtures of tests/fixtures/wire: 200 kB over a clean link).
LOGGED_INITIAL_WINDOW = {"aioquic": 12520, "quic-go": 40064, "picoquic": 15360, "quinn": 12000, "tquic": 12520,
                         "s2n-quic": 12520,
                         "quiche": 12000}


def test_the_wire_floor_is_below_every_logged_initial_window_and_sees_a_large_one():
    """analysis.initial_window_floor is a lower bound: on every fixture stack the floor,
    less a datagram, is at most the window the stack logged; and it is tight enough to
    see quic-go's 32-datagram window above §7.2's cap."""
    from test_wire_decode import STACKS, load

    from harness.verdict import analysis

    for stack in STACKS:
        view = load(stack)
        floor, _, flight, allowance = analysis.initial_window_floor(view)
        mds = max(d.udp_size for d in view.datagrams if d.entered and d.direction == "s2c")
        assert flight - allowance == floor and floor - mds <= LOGGED_INITIAL_WINDOW[stack], (stack, floor, mds)
    _, high = initial_window_bounds(1252)
    quic_go = load("quic-go")
    assert analysis.initial_window_floor(quic_go)[0] - 1252 > high
