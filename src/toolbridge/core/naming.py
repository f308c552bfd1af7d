"""Near-name suggestions for unknown tool names. They feed error text, never execution.

A `NameIndex` is built once per set of names (the registry caches it), so an unknown
name costs a few set operations, not an edit-distance pass over every tool.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import pairwise

__all__ = ["NameIndex"]

_MAX_NAME = 200
_MIN_SIMILARITY = 0.6
_SHORT = 8  # bigrams say little about names this short


def _fold(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def _bigrams(text: str) -> frozenset[str]:
    return frozenset(map("".join, pairwise(text))) or frozenset({text})


def _without_namespace(name: str) -> str:
    """Drop a namespace models invent in front of a real name: "functions.read_file",
    "default_api:read_file", "tools/read_file", "mcp.server.read_file"."""
    return name[max(name.rfind("."), name.rfind(":"), name.rfind("/")) + 1 :]


class NameIndex:
    """Registered names folded for exact look-up and split into bigrams for similarity."""

    __slots__ = ("_by_fold", "_grams", "_letters", "_words")

    def __init__(self, names: Sequence[str]) -> None:
        # Folded spelling -> every name with that spelling ("Read-File" and "read_file"
        # fold alike: a model's "READ_FILE" gets both, never one picked silently).
        self._by_fold: dict[str, list[str]] = {}
        for name in names:
            folded = _fold(name)
            for key in dict.fromkeys((folded, folded.replace("_", ""))):
                self._by_fold.setdefault(key, []).append(name)
        self._grams = [(name, _bigrams(_fold(name))) for name in names]
        self._letters = {name: Counter(_fold(name)) for name in names}
        self._words = {name: frozenset(_fold(name).split("_")) - {""} for name in names}

    def suggest(self, name: str, limit: int = 3) -> list[str]:
        """Names the model probably meant, best first; empty when none is close.

        At most `limit` names, except that names tied with the last one are all listed:
        a tie is never settled by picking one silently.

        Case, ``-``/``_`` and invented namespaces are ignored; otherwise names are ranked
        by the Dice similarity of their character bigrams (typos, a missing or extra
        letter score high), short names of the same length by their letters (swapped
        letters break bigrams there), and names whose words all appear in
        the other (``grep_files`` for ``grep``).
        """
        if not name or not self._grams:
            return []
        name = name[:_MAX_NAME]
        stripped = _without_namespace(name)
        for candidate in (name, stripped):
            folded = _fold(candidate)
            for key in (folded, folded.replace("_", "")):
                if key in self._by_fold:
                    return list(self._by_fold[key])
        folded = _fold(stripped)
        grams = _bigrams(folded)
        letters: Counter[str] | None = None
        words = frozenset(folded.split("_")) - {""}
        scored = []
        for registered, other in self._grams:
            score = 2 * len(grams & other) / (len(grams) + len(other))
            if score < _MIN_SIMILARITY and len(registered) == len(folded) <= _SHORT:
                letters = letters or Counter(folded)
                same = (letters & self._letters[registered]).total()
                score = 0.9 * 2 * same / (len(folded) + len(registered))
            own = self._words[registered]
            if score < _MIN_SIMILARITY and own and words and (own <= words or words <= own):
                score = 0.8
            if score >= _MIN_SIMILARITY:
                scored.append((-score, registered))
        scored.sort()
        if len(scored) > limit > 0:
            last = scored[limit - 1][0]
            while limit < len(scored) and scored[limit][0] == last:
                limit += 1
        return [registered for _, registered in scored[:limit]]
