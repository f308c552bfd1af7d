"""Fixtures of the network-guard tests: real local HTTP servers and a scripted resolver."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest


def load_local_http() -> Any:
    """The shared `local_http` helper module (test folders are not packages)."""
    name = "toolbridge_tests_local_http"
    if name not in sys.modules:
        path = Path(__file__).with_name("local_http.py")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


class ScriptedResolver:
    """A resolver that answers from a table and counts the questions it was asked."""

    def __init__(self, answers: dict[str, Sequence[str]]) -> None:
        self.answers = dict(answers)
        self.calls: list[str] = []

    async def __call__(self, host: str) -> list[str]:
        self.calls.append(host)
        if host not in self.answers:
            raise OSError(f"[Errno -2] Name or service not known: {host}")
        return list(self.answers[host])


@pytest.fixture
def resolver() -> Callable[[dict[str, Sequence[str]]], ScriptedResolver]:
    return ScriptedResolver


@pytest.fixture
async def servers() -> AsyncIterator[Any]:
    async for make in load_local_http().running_servers():
        yield make


@pytest.fixture
def local_http() -> Any:
    """The helper module, for its `Reply` type."""
    return load_local_http()
