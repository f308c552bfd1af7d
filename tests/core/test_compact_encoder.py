"""`compact_encoder`, which writes the journal's stored texts and the arguments' digest:
the same text `json.dumps` writes (a stored journal's digests still match), a value that
holds itself a clean error at any recursion limit (never a crash of the process), no trace
of a failed value in the next one, and one encoder shared by threads and by a `default`
that encodes again. Real threads, a real subprocess, a real SQLite journal."""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pydantic
import pytest

from toolbridge.core.jsontext import compact_encoder, json_default
from toolbridge.execution.approval import arguments_digest, canonical_arguments
from toolbridge.journal import JournalError
from toolbridge.journal.rows import to_json


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Ratio(float):
    pass


class Name(str):
    pass


class Point(pydantic.BaseModel):
    x: float
    y: int
    tags: list[str] = []


@dataclasses.dataclass
class Box:
    size: float
    point: Point
    names: tuple[str, ...]


def dumps(value: Any) -> str:
    """What the digest's canonical text was before `compact_encoder`: `json.dumps`."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=json_default
    )


FLOATS = [1e16, -0.0, 1.0, 0.1, 1e-7, 5e-324, 1.7976931348623157e308, 123456789.125, 2.5e15]
VALUES: list[Any] = [
    {},
    {"a": 1, "B": 2, "b": [3, {"z": None, "y": True, "x": False}]},
    {"text": 'é 日本 \U0001f600 \u2028 \x00 \\ " \n\t', "empty": ""},
    {f"k{i}": float(v) for i, v in enumerate(FLOATS)},
    {"nan": math.nan, "inf": math.inf, "-inf": -math.inf},
    {"huge": 10**300, "neg": -(10**200), "big": 2**63, "small": -(2**63) - 1},
    {1: "int key", 2.5: "float key", -3: "negative key"},
    {None: "null key"},
    {False: "bool key"},
    {"enum": Color.RED, "level": Level.HIGH, "ratio": Ratio(1e16), "name": Name("n")},
    {"set": {3}, "frozen": frozenset({"x"}), "tuple": (1, (2, 3)), "decimal": Decimal("1.10")},
    {"model": Point(x=1e16, y=2, tags=["a"]), "box": Box(-0.0, Point(x=1.0, y=0), ("q",))},
    {"deep": json.loads("[" * 200 + "]" * 200)},
    {"bytes": b"\xff", "path": Path("/tmp/x"), "type": int},
    {"list": list(range(50)), "nested": {"a": {"b": {"c": [1.5, -2.25, 3e-5]}}}},
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_the_digest_text_is_what_json_dumps_wrote(value: Any) -> None:
    """A journal written before keeps its digests: the canonical text, byte for byte."""
    assert canonical_arguments(value) == dumps(value)
    text = f"tool\n{dumps(value)}".encode()
    assert arguments_digest("tool", value) == hashlib.sha256(text).hexdigest()


def test_floats_one_by_one() -> None:
    for number in [*FLOATS, math.pi, -1e-300, 1 / 3, 2.0**53, 2.0**53 + 2]:
        assert canonical_arguments({"n": number}) == dumps({"n": number})
        assert json.loads(to_json({"n": number})) == {"n": number}


def test_unsortable_keys_are_the_error_they_were() -> None:
    with pytest.raises(TypeError):
        dumps({1: "a", "b": 2})
    with pytest.raises(TypeError):
        canonical_arguments({1: "a", "b": 2})  # type: ignore[dict-item]
    assert json.loads(to_json({1: "a", "b": 2, (1, 2): 3})) == {"1": "a", "b": 2, "(1, 2)": 3}


def test_stored_text_keeps_what_json_cannot_hold_by_name() -> None:
    text = to_json({"nan": math.nan, "inf": [math.inf, -math.inf], "x": 10**100})
    assert json.loads(text) == {"nan": "NaN", "inf": ["Infinity", "-Infinity"], "x": 10**100}
    with pytest.raises(JournalError, match="cannot be stored"):
        to_json({"too long": 10**5000})  # more digits than Python writes


def test_a_value_that_failed_leaves_no_trace_in_the_next() -> None:
    """An error midway (a NaN the encoder refuses) leaves the containers it was in behind
    in the encoder's loop check; the same containers, fixed, encode next time."""
    encode = compact_encoder(default=repr, allow_nan=False)
    inner = [1.0, math.nan]
    value = {"inner": inner}
    with pytest.raises(ValueError, match="Out of range"):
        encode(value)
    inner[1] = 2.0
    assert encode(value) == '{"inner":[1.0,2.0]}'


def test_a_value_holding_itself_is_an_error_not_a_loop() -> None:
    loop: list[Any] = [1]
    loop.append({"again": loop})
    with pytest.raises(ValueError, match="Circular"):
        canonical_arguments({"a": loop})
    with pytest.raises(JournalError, match="does not contain itself"):
        to_json({"a": loop})
    assert canonical_arguments({"a": [1, {"again": [1]}]}) == '{"a":[1,{"again":[1]}]}'


def test_a_value_holding_itself_is_refused_as_such_not_at_the_recursion_limit() -> None:
    """The retry that names NaN walked a value holding itself to the recursion limit
    (5.7 s at a limit of a million) and then said only "maximum recursion depth"."""
    loop: dict[str, Any] = {"n": float("nan")}
    loop["self"] = [loop]
    with pytest.raises(JournalError, match="holds itself"):
        to_json(loop)
    shared = [float("inf")]  # held twice, not inside itself: stored twice
    assert to_json({"a": shared, "b": [shared, (shared,)]}) == (
        '{"a":["Infinity"],"b":[["Infinity"],[["Infinity"]]]}'
    )


HOLDS_ITSELF = textwrap.dedent(
    """
    import asyncio, sys
    sys.setrecursionlimit(200_000)  # a program that recurses deeply raised it
    from toolbridge.execution.approval import canonical_arguments
    from toolbridge.journal import CallKey, JournalError, SQLiteJournal
    from toolbridge.journal.rows import to_json

    loop = {"name": "x"}
    loop["self"] = [loop]
    for encode in (canonical_arguments, to_json):
        try:
            encode(loop)
        except (ValueError, JournalError) as exc:
            print(encode.__name__, type(exc).__name__, flush=True)

    async def main() -> None:
        async with SQLiteJournal(sys.argv[1]) as journal:
            keys = [CallKey("s", f"c{i}", "h") for i in range(3)]
            answers = await asyncio.gather(
                journal.claim(keys[0], "t", {"ok": 1}),
                journal.claim(keys[1], "t", loop),
                journal.claim(keys[2], "t", {"ok": 2}),
                return_exceptions=True,
            )
            print([type(a).__name__ for a in answers], flush=True)
            stored = {entry.key.call_id for entry in await journal.entries(session="s")}
            print(sorted(stored), flush=True)

    asyncio.run(main())
    """
)


def test_a_value_holding_itself_never_crashes_the_process(tmp_path: Path) -> None:
    """Under a raised recursion limit, encoding a value that holds itself until the
    limit overflowed the C stack (the process died of SIGSEGV): it is the error of its
    own call, and the journal stores the others of its batch."""
    script = tmp_path / "holds_itself.py"
    script.write_text(HOLDS_ITSELF)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "journal.db")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.splitlines() == [
        "canonical_arguments ValueError",
        "to_json JournalError",
        "['Claim', 'JournalError', 'Claim']",
        "['c0', 'c2']",
    ]


def test_threads_share_one_encoder() -> None:
    """Threads (two event loops, the SQLite writer) encode with one encoder at once, and
    a `default` that encodes again mid-value: each gets its own value's text."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        shared = [{"shared": list(range(20)), "n": i} for i in range(4)]

        class Nested:
            def __repr__(self) -> str:
                return to_json({"inner": shared})

        values: list[Any] = [*shared, {"nested": Nested(), "also": shared}]
        expected = [
            json.dumps(v, separators=(",", ":"), ensure_ascii=False, default=repr) for v in values
        ]
        wrong: list[str] = []
        start = threading.Barrier(6)

        def work(encode: Callable[[Any], str]) -> None:
            start.wait(timeout=60)
            for _ in range(300):
                for value, text in zip(values, expected, strict=True):
                    got = encode(value)
                    if got != text:
                        wrong.append(got)

        threads = [threading.Thread(target=work, args=(to_json,)) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
        assert wrong == []
    finally:
        sys.setswitchinterval(switch)
