"""Hypothesis settings of the fuzz suite: a short budget by default, longer ones on demand.

``make test`` runs every target with 100 examples (the default profile). CI runs the fuzz
suite again on its own with 300 (``TOOLBRIDGE_FUZZ=ci``, ``make fuzz-ci``, .ci/run), and
``TOOLBRIDGE_FUZZ=long`` (``make fuzz``) runs 20,000 with no deadline. The example
database lives in ``.hypothesis/`` (git-ignored), so a failure found once is replayed
first on the next run of this machine.
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
    "fuzz-quick",  # a third of CI's budget: the suite's cost, not its reach (fuzz-ci has that)
    max_examples=100,
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

_PROFILES = {"long": "fuzz-long", "ci": "fuzz-ci", "": "fuzz-quick"}
_CHOSEN = os.environ.get("TOOLBRIDGE_FUZZ", "")
if _CHOSEN not in _PROFILES:
    raise ValueError(
        f"TOOLBRIDGE_FUZZ={_CHOSEN!r} is not a fuzz budget: use 'ci' (300 examples per "
        "target), 'long' (20,000) or leave it unset (100)"
    )
FUZZ_SETTINGS = settings.get_profile(_PROFILES[_CHOSEN])
"""Decorate each fuzz test with ``@FUZZ_SETTINGS`` (import it from this conftest's module)."""
