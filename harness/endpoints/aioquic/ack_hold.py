"""Held acknowledgements: the contract's LL_ACK_HOLD_MS, for aioquic as the receiver.

RFC 9002 §5.3 has the sender cap a peer's reported ACK Delay at the max_ack_delay the
peer declared, once the handshake is confirmed. aioquic's own receiver acknowledges
within a millisecond, so a sender paired with it never sees a delay to cap, and a
sender that forgot the cap passes. A receiver that holds each acknowledgement longer
than the max_ack_delay it declares (aioquic declares 25 ms) and reports the wait
honestly, as a busy or descheduled receiver does, gives the sender that case.

aioquic arms a space's acknowledgement for the arrival of its first unacknowledged
ack-eliciting packet plus the connection's `_ack_delay` (kGranularity), and writes
the ACK Delay field as the time since the largest packet arrived; setting
`_ack_delay` to the hold is the whole change. Initial and Handshake packets carry
any pending ACK whenever they are built, so the hold only acts in the application
space: after the handshake is confirmed, where the cap applies, and, for an uploading
client whose HANDSHAKE_DONE was lost, before, where §5.3 says to ignore it. Standalone (imports nothing):
the real endpoint imports it beside endpoint.py, virtual time as a module of this
package.
"""

from __future__ import annotations

#: The longest hold accepted, ms: the suite's idle timeouts and PTOs stay meaningful.
MAX_HOLD_MS = 1000


def hold_acks(connection, hold_ms: int) -> None:
    """Makes aioquic's `connection` send each acknowledgement `hold_ms` after the first
    ack-eliciting packet it covers arrived. ValueError for a hold out of range, or for
    an aioquic without the attribute (a release this was not written against)."""
    if not 0 < hold_ms <= MAX_HOLD_MS:
        raise ValueError(f"an ACK hold of {hold_ms} ms: between 1 and {MAX_HOLD_MS}")
    if not hasattr(connection, "_ack_delay"):
        raise ValueError("this aioquic has no QuicConnection._ack_delay to hold its acknowledgements with")
    connection._ack_delay = hold_ms / 1000
