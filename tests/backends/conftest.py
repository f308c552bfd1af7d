"""A real local Ray runtime for the backend tests, started once, on loopback only.

The test tools (``ray_tools``) are importable by name for these tests alone: the caller's
registry finds them through ``sys.path`` while each test runs, and Ray's workers through
the ``PYTHONPATH`` the local node was started with. Neither outlives this folder's use.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def ray_tools_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import ray_tools`` works in this test (the caller's registry), and only in it."""
    monkeypatch.syspath_prepend(str(HERE))


@pytest.fixture(scope="session")
def ray_runtime() -> Iterator[None]:
    import ray

    # Ray's workers import the test tools as the caller does. They are spawned by the local
    # node, which takes its environment from this process when ray.init starts it: the
    # variable is set for that moment only, not for the rest of the session.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(
            "PYTHONPATH",
            os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]),
        )
        ray.init(
            address="local",  # a runtime of its own, never another run's (RAY_ADDRESS, ray start)
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
