"""Frozen JSON data refuses mutation, and the refusal names a way out that exists."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

import pytest

from toolbridge.core.frozen import FrozenDict, FrozenList, freeze


@pytest.mark.parametrize(
    ("mutate", "kind"),
    [
        (lambda data: data.__setitem__("a", 3), "FrozenDict"),
        (lambda data: data["a"].append(3), "FrozenList"),
        (lambda data: data["a"][1].update(c=3), "FrozenDict"),
    ],
)
def test_a_refused_mutation_names_an_importable_thaw(
    mutate: Callable[[Any], object], kind: str
) -> None:
    frozen = freeze({"a": [1, {"b": 2}]})
    assert type(frozen) is FrozenDict and type(frozen["a"]) is FrozenList
    with pytest.raises(TypeError, match=f"{kind} is frozen") as caught:
        mutate(frozen)
    named = re.search(r"copy it with ([\w.]+)\(\)", str(caught.value))
    assert named is not None, str(caught.value)
    module, _, name = named.group(1).rpartition(".")
    thaw = getattr(importlib.import_module(module), name)
    assert thaw.__module__ == module  # its home, not a module that happens to import it
    thawed = thaw(frozen)
    assert thawed == {"a": [1, {"b": 2}]}
    assert type(thawed) is dict and type(thawed["a"]) is list and type(thawed["a"][1]) is dict
    thawed["a"].append(3)  # a plain copy: it changes, the frozen original does not
    assert frozen["a"] == [1, {"b": 2}]
