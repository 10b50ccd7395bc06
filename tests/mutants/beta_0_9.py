"""Mutant: NewReno whose loss reduction factor is 0.9 instead of 0.5
(kLossReductionFactor, RFC 9002 §7.3.2), so it yields almost nothing to
competing flows.

Source: a wrong β is a real defect class: quic-go v0.65.0 cuts NewReno by 0.7
(finding F1, docs/findings.md); 0.9 is the same mistake made more aggressive.
"""

from tests.mutants._reno import ParametrisedReno

BETA = 0.9


class Beta09(ParametrisedReno):
    loss_reduction_factor = BETA
