"""A `ToolSource` that is wrong says so, and how to fix it, where it is made or used
(never a bare ``'int' object is not iterable`` from a worker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolbridge import ToolContext
from toolbridge.backends.ray import ToolSource


@pytest.mark.parametrize("factory", ["ray_tools", "ray_tools:", ":build", ":"])
def test_a_factory_not_spelled_module_colon_attribute_is_refused_when_made(factory: str) -> None:
    with pytest.raises(ValueError, match="must look like 'module:attribute'"):
        ToolSource(factory)


def test_a_factory_that_returns_no_tools_names_itself_and_what_it_returned(
    workspace: Path,
) -> None:
    source = ToolSource("builtins:id")  # a function, but not one that builds tools
    with pytest.raises(TypeError, match=r"factory 'builtins:id' returned int, not a Tool"):
        source.registry(ToolContext(workspace=workspace))
