"""RFC 9002 §5.3's example estimator, judged from a sender's logged smoothed_rtt and
rttvar one sample at a time (properties/test_rtt_estimator.py): the RFC's own
estimator passes, aioquic's rttvar (F99), other gains and a wrong first sample fail,
and moves with two samples between them are not judged."""

from __future__ import annotations

from harness.observe.events import Metrics, Trace
from harness.verdict.analysis import AckSeen
from properties.test_rtt import VIRTUAL_JOIN
from properties.test_rtt_estimator import judge_estimator

MAD_US = 25_000.0
#: Samples (µs) a path with jitter and a growing queue gives, one per ACK frame.
SAMPLES = [40_000, 40_400, 41_900, 40_200, 44_000, 47_500, 43_100, 40_800, 52_000, 49_000, 45_500, 41_000]


def _run(samples=SAMPLES, srtt_gain=1 / 8, var_from_min=False, first_var=0.5, skip_logs=()):
    """A trace whose sender logs each sample's metrics as the estimator given, and the
    frames that gave the samples, 10 ms apart."""
    events, frames = [], []
    srtt = var = None
    low = None
    for i, sample in enumerate(samples):
        t = 100_000.0 + 10_000 * i
        frames.append(AckSeen(t, "application", i, 0, 1, True, True, float(sample)))
        low = sample if low is None else min(low, sample)
        if srtt is None:
            srtt, var = float(sample), sample * first_var
        else:
            var = 0.75 * var + 0.25 * abs((low if var_from_min else srtt) - sample)
            srtt = (1 - srtt_gain) * srtt + srtt_gain * sample
        if i not in skip_logs:
            events.append(Metrics(t, smoothed_rtt_us=srtt, rtt_variance_us=var, latest_rtt_us=float(sample),
                                  min_rtt_us=float(low)))
    return judge_estimator("x-newreno", Trace("x", "server", events, "test"), frames, MAD_US, VIRTUAL_JOIN)


def test_the_rfcs_estimator_passes_every_move():
    judged, found = _run()
    assert judged == len(SAMPLES) and found == []


def test_an_rttvar_of_the_distance_to_min_rtt_is_f99():
    judged, found = _run(var_from_min=True)
    kinds = {d.kind for d in found}
    assert kinds == {"rttvar-not-the-example-average"}
    assert all(d.measured["off_min_rtt_distance_us"] < 20 for d in found)


def test_another_gain_moves_smoothed_rtt_too_far():
    judged, found = _run(srtt_gain=1 / 4)
    assert "smoothed-rtt-not-the-example-average" in {d.kind for d in found}
    assert all(d.measured.get("off_min_rtt_distance_us", 1e9) > 20 for d in found
               if d.kind == "rttvar-not-the-example-average")


def test_a_first_sample_that_is_not_taken_whole_fails():
    _, found = _run(first_var=0.25)
    assert [d.kind for d in found][:1] == ["rtt-first-sample"]


def test_two_samples_between_logged_moves_are_not_judged():
    """A log that missed a sample: the move after it spans two samples and is left out,
    never read as a wrong gain."""
    judged, found = _run(skip_logs=(4, 8))
    assert found == [] and judged == len(SAMPLES) - 4
