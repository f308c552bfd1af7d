"""Fixtures of the agent tests: a scripted provider server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.agent.scripted_server import ScriptedServer, serve


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    yield from serve()
