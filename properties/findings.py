"""Recorded findings: a real stack violates a property, reproducibly.

The property stays as it is; the case is marked xfail(strict=True) with the reason,
so the suite reports it and a fix upstream turns the run green loudly (an XPASS
fails the run until the entry is removed). Each entry is described, with its
minimal schedule and replay line, in docs/findings.md.
"""

#: (test function name, target id) → reason shown by pytest.
FINDINGS: dict[tuple[str, str], str] = {
    ("test_recovery_reduces_window_by_beta", "quic-go-newreno"): (
        "F1: quic-go v0.65.0 cuts the window to 0.7×cwnd on loss; its only controller is a "
        "CUBIC sender in Reno mode with renoBeta = 0.7, not NewReno's kLossReductionFactor "
        "0.5 (RFC 9002 §7.3.2); docs/findings.md"
    ),
}
