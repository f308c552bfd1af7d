"""JSON text for the model: one renderer for every place that turns data into text.

Non-ASCII stays readable, pydantic models and dataclasses are dumped as data, sets
and tuples become arrays, and anything else falls back to ``str()`` - never a repr
of a container.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

__all__ = ["compact_encoder", "json_default", "to_json_text"]


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


def compact_encoder(
    *, default: Callable[[Any], Any], sort_keys: bool = False, allow_nan: bool = True
) -> Callable[[Any], str]:
    """A function that writes a value as compact JSON (no spaces, non-ASCII as it is), the
    text ``json.dumps`` writes with these options, for text written once per call.

    ``JSONEncoder.encode`` makes a C encoder for every value (about half the time of a
    small one); these are made once and kept, one per caller at a time (threads, and a
    `default` that encodes again, each take their own). Each keeps the loop check: a value
    that holds itself is a `ValueError`, never a recursion as deep as the recursion limit
    allows, which overflows the C stack when a program raised that limit."""
    make = getattr(json.encoder, "c_make_encoder", None)  # CPython's, not in the stubs
    if make is None:  # no C accelerator: the pure-Python encoder
        encoder = json.JSONEncoder(
            separators=(",", ":"),
            ensure_ascii=False,
            default=default,
            sort_keys=sort_keys,
            allow_nan=allow_nan,
        )
        return encoder.encode
    idle: list[tuple[Callable[[Any, int], Any], dict[int, Any]]] = []
    join = "".join

    def encode(value: Any) -> str:
        try:
            chunks, markers = idle.pop()  # atomic: no two callers share an encoder
        except IndexError:
            markers = {}
            chunks = make(
                markers, default, json.encoder.encode_basestring, None, ":", ",", sort_keys,
                False, allow_nan,
            )  # fmt: skip
        try:
            text = join(chunks(value, 0))
        except BaseException:
            markers.clear()  # an error midway leaves the containers it was in
            idle.append((chunks, markers))
            raise
        idle.append((chunks, markers))  # (empty: the encoder took out each it left)
        return text

    return encode
