"""The RFCs' constants, in one place every room may read: the congestion-control
families and their kLossReductionFactor, the loss-detection thresholds.

RFC 9002 calls its constants examples or recommendations; where a value here is a
recommendation, the comment says so, and the properties that use it say which rule
they judge. Nothing here knows a stack, a testbed or a run."""

#: kLossReductionFactor of each family (RFC 9002 §7.3.2 for NewReno, RFC 9438 §4.6
#: for CUBIC). A controller is judged by its family's β, never by the one its
#: factory claims: a mutant that claims β 0.9 must still fail.
FAMILY_BETA = {"newreno": 0.5, "cubic": 0.7}

#: kPacketThreshold (RFC 9002 §6.1.1, RECOMMENDED 3): reordering by fewer packets is not loss.
K_PACKET_THRESHOLD = 3
