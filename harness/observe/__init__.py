"""Observation: qlog readers, the wire view, the ground-truth join and derived facts.

Everything here turns what a run left behind into the normalised event model of
`harness.observe.events`, which properties and the TLA+ trace validation read.
"""
