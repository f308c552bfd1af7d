"""Near-name suggestions for unknown tool names. They feed error text, never execution."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

__all__ = ["suggest_names"]

# Namespaces models invent in front of a real name: "functions.read_file",
# "default_api:read_file", "tools/read_file", "mcp.server.read_file".
_NAMESPACE = re.compile(r".*[.:/]")
_MAX_NAME = 200


def _fold(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def suggest_names(name: str, names: Sequence[str], limit: int = 3) -> list[str]:
    """Registered names the model probably meant, best first; empty when none is close."""
    if not names or not name:
        return []
    name = name[:_MAX_NAME]
    by_fold: dict[str, str] = {}
    for registered in names:
        by_fold.setdefault(_fold(registered), registered)
        by_fold.setdefault(_fold(registered).replace("_", ""), registered)
    stripped = _NAMESPACE.sub("", name)
    for candidate in (name, stripped):
        folded = _fold(candidate)
        for key in (folded, folded.replace("_", "")):
            if key in by_fold:
                return [by_fold[key]]
    folded = _fold(stripped)
    choices = [_fold(n) for n in names]
    close = difflib.get_close_matches(folded, choices, n=limit, cutoff=0.75)
    return [names[choices.index(c)] for c in close]
