"""pytest plugin for bench/model_coverage_bench.py: a Hypothesis profile "bench"
with exactly $LONGLOOK_BENCH_EXAMPLES examples and no shrinking, so both arms of
the comparison spend the same budget."""

import os

from hypothesis import HealthCheck, Phase, settings

settings.register_profile(
    "bench", max_examples=int(os.environ.get("LONGLOOK_BENCH_EXAMPLES", "12")), deadline=None,
    phases=[Phase.explicit, Phase.generate, Phase.target],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
