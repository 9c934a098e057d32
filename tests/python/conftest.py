import os

from hypothesis import HealthCheck, settings

# Deterministic example generation, so CI failures reproduce; no deadline
# (a shared 2-core machine makes per-example timing meaningless).
settings.register_profile(
    "normkit",
    max_examples=int(os.environ.get("NORMKIT_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("normkit")
