"""Planted controller (issue 17, BBR judged): aioquic's NewReno that calls itself BBR.
A loss-based window fills a deep buffer, halves at every random loss and never
drains the queue for a ProbeRTT, so each BBR property of properties/test_bbr.py must
fail it; were they to pass, they would not tell a model-based sender from any other.
"""

from aioquic.quic.congestion.reno import RenoCongestionControl


class RenoCalledBbr(RenoCongestionControl):
    longlook_family = "bbr"
