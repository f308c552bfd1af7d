"""Fixtures for the executor tests: a registry over a real workspace, and a counter."""

from __future__ import annotations

import importlib
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from toolbridge import ToolContext, ToolRegistry


class InFlight:
    """Counts calls running right now and the most that ever ran at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.started = 0

    def enter(self) -> None:
        self.now += 1
        self.started += 1
        self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        self.now -= 1


@pytest.fixture(autouse=True)
def private_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The system temp folder for this test: saved results land here, not in /tmp."""
    folder = tmp_path / "system-temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def in_flight() -> InFlight:
    return InFlight()


@pytest.fixture
def registry(workspace: Path) -> ToolRegistry:
    return ToolRegistry(context=ToolContext(workspace=workspace, session="test-session"))


BLOCKING_MODULE = """
import os
import time
from pathlib import Path


def sleep_forever(pid_file: str) -> str:
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(600)
    return "woke up"


def add(a: int, b: int) -> dict:
    print("noise on stdout must not corrupt the reply")
    return {"sum": a + b, "pid": os.getpid()}


def fail(message: str) -> str:
    raise ValueError(message)
"""


@pytest.fixture
def blocking_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A real module file with blocking functions, importable by the worker processes."""
    folder = tmp_path / "modules"
    folder.mkdir()
    name = f"tb_blocking_{abs(hash(str(tmp_path))) % 10**8}"
    (folder / f"{name}.py").write_text(textwrap.dedent(BLOCKING_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    module = importlib.import_module(name)
    yield module
    sys.modules.pop(name, None)
