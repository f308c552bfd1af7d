"""Every string in a JSON value, for tests that check what was written or sent."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator


def strings(value: object, *, json_text: bool = False) -> Iterator[str]:
    """Every string in `value`, keys included; with `json_text`, also those of a string
    that is a JSON object itself (a schema some providers are sent as text: Bedrock's)."""
    if isinstance(value, str):
        yield value
        if json_text and value.startswith("{"):
            with contextlib.suppress(ValueError):
                yield from strings(json.loads(value), json_text=True)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item, json_text=json_text)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item, json_text=json_text)
