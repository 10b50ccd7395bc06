"""Units on the command line: rates, times, sizes, fractions."""

import pytest

from harness.schedule.units import UnitError, fraction, rate_bps, size_bytes, time_us


@pytest.mark.parametrize("text,bps", [("50mbit", 50_000_000), ("1gbit", 10**9), ("500kbit", 500_000), ("1.5mbit", 1_500_000)])
def test_rates(text, bps):
    assert rate_bps(text) == bps


@pytest.mark.parametrize("text,us", [("40ms", 40_000), ("250us", 250), ("2s", 2_000_000), ("0.5ms", 500)])
def test_times(text, us):
    assert time_us(text) == us


def test_sizes():
    assert size_bytes("20MB") == 20_000_000
    assert size_bytes("64KiB") == 65_536
    assert size_bytes("1000") == 1000


@pytest.mark.parametrize("call,text,needle", [
    (rate_bps, "50", "50mbit"),
    (rate_bps, "fast", "--rate"),
    (rate_bps, "0mbit", "positive"),
    (time_us, "40", "40ms"),
    (size_bytes, "-1", "--bytes"),
    (fraction, "1.5", "1% is 0.01"),
    (fraction, "x", "not a number"),
])
def test_errors_name_the_flag_and_the_fix(call, text, needle):
    with pytest.raises(UnitError) as e:
        call(text)
    assert needle in str(e.value)


def test_fraction_bounds():
    assert fraction("0") == 0.0 and fraction("1") == 1.0 and fraction("0.01") == 0.01
