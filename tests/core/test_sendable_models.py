"""`sendable(value, models=True)`: pydantic models (what the MCP server sends and its
client reads) escaped by the same walk as everything else, each lone surrogate the six
characters ``\\udc80``; a model copied only when something in it changed, and pydantic
imported only when models are asked for."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolbridge.core.sendable import sendable


class Item(BaseModel):
    model_config = ConfigDict(extra="allow")

    text: str = "plain"
    meta: dict[str, Any] | None = None
    children: list[Item] = []


@dataclasses.dataclass
class Box:
    item: Item
    label: str = "box"


def test_a_model_is_walked_only_when_models_are_asked_for() -> None:
    item = Item(text="caf\udce9")
    assert sendable(item) is item  # as every caller outside MCP had it
    escaped = sendable(item, models=True)
    assert escaped.text == "caf\\udce9"
    assert item.text == "caf\udce9"  # a copy: the model given is left as it was


def test_fields_extra_fields_and_nested_models_are_escaped() -> None:
    item = Item(
        text="a\ud800",
        meta={"k\udc80": [Item(text="deep\udc81")]},
        children=[Item(), Item(text="\udc82", note="x\udc83")],
        tag="t\udc84",
    )
    escaped = sendable(item, models=True)
    assert escaped.model_dump_json() == (
        '{"text":"a\\\\ud800","meta":{"k\\\\udc80":[{"text":"deep\\\\udc81","meta":null,'
        '"children":[]}]},"children":[{"text":"plain","meta":null,"children":[]},'
        '{"text":"\\\\udc82","meta":null,"children":[],"note":"x\\\\udc83"}],'
        '"tag":"t\\\\udc84"}'
    )
    assert escaped.children[0] is item.children[0]  # nothing in it changed: not copied


def test_an_escaped_default_counts_as_set() -> None:
    # model_copy(update=...) counts a changed field as set, as the MCP copy did: an
    # escaped default is dumped even where only set fields are
    class Defaulted(BaseModel):
        name: str = "n\udc80"
        other: str = "o"

    escaped = sendable(Defaulted(), models=True)
    assert escaped.model_dump(exclude_unset=True) == {"name": "n\\udc80"}


def test_a_clean_model_is_the_same_object() -> None:
    item = Item(text="caf\u00e9 \U0001f600", meta={"k": [1, None]}, children=[Item()], more="x")
    assert sendable(item, models=True) is item
    boxed = [Box(item), {"item": item}]
    assert sendable(boxed, models=True) is boxed


def test_models_in_dataclasses_and_dataclasses_in_models() -> None:
    box = Box(Item(text="\udc80"), label="b\udc81")
    escaped = sendable(box, models=True)
    assert (escaped.item.text, escaped.label) == ("\\udc80", "b\\udc81")
    inside = sendable(Item(meta={"box": Box(Item(text="\udc80"))}), models=True)
    assert inside.meta is not None and inside.meta["box"].item.text == "\\udc80"


def test_values_nested_past_the_recursion_limit_in_a_model() -> None:
    # the MCP side's own recursive copy gave up on these (RecursionError)
    deep: Any = ["\udc80"]
    for _ in range(sys.getrecursionlimit() * 2):
        deep = [deep]
    escaped = sendable(Item(meta={"deep": deep}), models=True)
    value = escaped.meta["deep"] if escaped.meta is not None else None
    while isinstance(value, list) and value and isinstance(value[0], list):
        value = value[0]
    assert value == ["\\udc80"]


def test_escaping_without_models_does_not_import_pydantic() -> None:
    code = (
        "import sys\n"
        "from toolbridge.core.sendable import sendable\n"
        "assert sendable({'k\\udc80': ['v\\udc80']}) == {'k\\\\udc80': ['v\\\\udc80']}\n"
        "assert 'pydantic' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
