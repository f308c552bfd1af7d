"""JSON text for the model: one renderer for every place that turns data into text.

Non-ASCII stays readable, pydantic models and dataclasses are dumped as data, sets
and tuples become arrays, and anything else falls back to ``str()`` - never a repr
of a container.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

__all__ = ["json_default", "to_json_text"]


def json_default(value: Any) -> Any:
    """`json.dumps` fallback: pydantic models and dataclasses dumped, sets as lists, else str."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=json_default)


def to_json_text(value: Any) -> str:
    """`value` as JSON text for the model."""
    return _ENCODER.encode(value)
