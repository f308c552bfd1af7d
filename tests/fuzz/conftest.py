"""Hypothesis settings of the fuzz suite: a short budget by default (CI), a long one on demand.

``TOOLBRIDGE_FUZZ=long`` (``make fuzz``) runs every target with a large example count and
no deadline; the default profile keeps the whole suite within a couple of minutes. The
example database lives in ``.hypothesis/`` (git-ignored), so a failure found once is
replayed first on the next run of this machine.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Under CI (CI=true) every run draws the same examples: a landing is never refused by a
# rare draw; new inputs are explored by local runs and `make fuzz`, which stay random.
settings.register_profile(
    "fuzz-ci",
    max_examples=300,
    deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "fuzz-long",
    max_examples=20_000,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

FUZZ_SETTINGS = settings.get_profile(
    "fuzz-long" if os.environ.get("TOOLBRIDGE_FUZZ") == "long" else "fuzz-ci"
)
"""Decorate each fuzz test with ``@FUZZ_SETTINGS`` (import it from this conftest's module)."""
