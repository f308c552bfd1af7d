"""A real local Ray runtime for the backend tests, started once, on loopback only."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # the test tools (ray_tools), for the caller's registry


@pytest.fixture(scope="session")
def ray_runtime() -> Iterator[None]:
    import ray

    # Workers import the test tools (ray_tools) as the caller does.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    ray.init(
        num_cpus=2,
        resources={"sandbox": 1},
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    try:
        yield
    finally:
        ray.shutdown()
