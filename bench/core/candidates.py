"""Compiled candidates for decode + cast + validate, side by side in one process (issue 22 §3).

Every candidate parses the same argument text and checks it against the same schema:

- floor: `json.loads` + jsonschema-rs `is_valid` (no cast, no error text);
- toolbridge: `ToolRegistry.prepare_call` (strict decode, lossless casts with a repair
  log, full JSON Schema, every error with its path);
- orjson: `orjson.loads` + jsonschema-rs `is_valid` (a faster decoder only);
- pydantic-core: a validator compiled from the JSON Schema's common subset (types,
  properties, required, enum, arrays, nested objects), `validate_json` in lax mode;
- msgspec: a `TypedDict` built from the same subset, `msgspec.json.Decoder(strict=False)`.

Workloads: W1-W4 of bench/core/workloads.py, and the function schemas of the Berkeley
Function Calling Leaderboard (BFCL v4, read from the bfcl-eval wheel) called with their
ground-truth arguments, as sent (valid) and with every number and boolean sent as
text (to cast). The rule probes ask each candidate what the project's documented rules
decide. Times are CPU time of this thread (`time.thread_time_ns`), interleaved case by
case over the rounds, so a burst of load from elsewhere hits every candidate alike.

    bench/.venvs/candidates/bin/python bench/core/candidates.py WHEEL [--rounds N]

`bench/core_candidates.py` builds that environment, fetches the wheel and runs this.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import typing
import zipfile
from collections.abc import Callable
from typing import Any, NotRequired, Required, TypedDict

import jsonschema_rs
import msgspec
import orjson
from pydantic_core import SchemaValidator, core_schema
from workloads import ADD_SCHEMA, SCHEDULE_SCHEMA, WORKLOADS

import toolbridge
from toolbridge.core.schema import check_parameters_schema

Check = Callable[[str], bool]  # one call: True when the arguments were accepted


class Unsupported(Exception):
    """A schema outside the subset a candidate can express."""


# --- the common subset, compiled by each candidate ----------------------------------


def _pydantic_core(schema: Any) -> Any:
    if not isinstance(schema, dict) or set(schema) - _SUBSET_KEYS:
        raise Unsupported(sorted(set(schema) - _SUBSET_KEYS) if isinstance(schema, dict) else "")
    if "enum" in schema:
        return core_schema.literal_schema(list(schema["enum"]))
    kind = schema.get("type")
    if kind == "object":
        required = set(schema.get("required", ()))
        fields = {
            name: core_schema.typed_dict_field(_pydantic_core(sub), required=name in required)
            for name, sub in schema.get("properties", {}).items()
        }
        return core_schema.typed_dict_schema(fields, extra_behavior="forbid")
    if kind == "array":
        items = schema.get("items")
        return core_schema.list_schema(_pydantic_core(items) if items else None)
    simple = {
        "string": core_schema.str_schema,
        "integer": core_schema.int_schema,
        "number": core_schema.float_schema,
        "boolean": core_schema.bool_schema,
    }
    if kind in simple:
        return simple[kind]()
    if kind is None:
        return core_schema.any_schema()
    raise Unsupported(f"type {kind!r}")


def _msgspec_type(schema: Any, name: str) -> Any:
    if not isinstance(schema, dict) or set(schema) - _SUBSET_KEYS:
        raise Unsupported("keywords")
    if "enum" in schema:
        return typing.Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if kind == "object":
        required = set(schema.get("required", ()))
        fields: dict[str, Any] = {}
        for key, sub in schema.get("properties", {}).items():
            inner = _msgspec_type(sub, f"{name}_{len(fields)}")
            fields[key] = Required[inner] if key in required else NotRequired[inner]
        make: Any = TypedDict
        return make(name, fields)
    if kind == "array":
        items = schema.get("items")
        return list[_msgspec_type(items, name + "_item") if items else Any]  # type: ignore[misc]
    simple = {"string": str, "integer": int, "number": float, "boolean": bool}
    if kind in simple:
        return simple[kind]
    if kind is None:
        return Any
    raise Unsupported(f"type {kind!r}")


_SUBSET_KEYS = {"type", "properties", "required", "items", "enum", "description", "default"}
_SUBSET_KEYS |= {"additionalProperties", "format", "title"}


def compile_all(name: str, schema: dict[str, Any]) -> dict[str, Check | None]:
    """One check per candidate for `schema`; None where the candidate cannot express it."""
    validator = jsonschema_rs.validator_for(schema)
    registry = toolbridge.ToolRegistry([_SchemaTool(name, schema)])
    checks: dict[str, Check | None] = {
        "floor": lambda text: bool(validator.is_valid(json.loads(text))),
        "toolbridge": lambda text: registry.prepare_call(name, text).error is None,
        "orjson": lambda text: bool(validator.is_valid(orjson.loads(text))),
    }
    try:
        compiled = SchemaValidator(_pydantic_core(schema))

        def pydantic(text: str) -> bool:
            try:
                compiled.validate_json(text)
            except ValueError:
                return False
            return True

        checks["pydantic-core"] = pydantic
    except Unsupported:
        checks["pydantic-core"] = None
    try:
        decoder = msgspec.json.Decoder(_msgspec_type(schema, "Args"), strict=False)

        def spec(text: str) -> bool:
            try:
                decoder.decode(text)
            except msgspec.ValidationError:
                return False
            return True

        checks["msgspec"] = spec
    except (Unsupported, TypeError):
        checks["msgspec"] = None
    return checks


class _SchemaTool(toolbridge.Tool):
    def __init__(self, name: str, schema: dict[str, Any]) -> None:
        self.name = name
        self.description = name
        self.parameters = schema

    async def execute(self, **kwargs: Any) -> Any:
        return kwargs


CANDIDATES = ("floor", "toolbridge", "orjson", "pydantic-core", "msgspec")


# --- BFCL -----------------------------------------------------------------------------

_BFCL_FILES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple")
_BFCL_FILES += ("live_multiple", "live_parallel", "live_parallel_multiple")
_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


def _standard(schema: Any) -> Any:
    """BFCL's Python-flavoured types as JSON Schema: dict, float, tuple, any."""
    if isinstance(schema, list):
        return [_standard(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _standard(value) for key, value in schema.items()}
    kind = out.get("type")
    if kind == "any":
        del out["type"]
    elif isinstance(kind, str):
        out["type"] = _TYPES.get(kind, kind)
    return out


def _first_answer(options: Any) -> Any:
    if isinstance(options, list):
        chosen = next((o for o in options if o != ""), None)
        return _first_answer(chosen) if isinstance(chosen, dict) else chosen
    if isinstance(options, dict):
        return {key: _first_answer(value) for key, value in options.items()}
    return options


def _as_text(value: Any) -> Any:
    """Every number and boolean sent as text, as a model often does."""
    if isinstance(value, dict):
        return {key: _as_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_text(item) for item in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return value


def bfcl_calls(wheel: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, schema, arguments) for every BFCL function with a ground-truth call."""
    calls: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {}
    with zipfile.ZipFile(wheel) as archive:
        for stem in _BFCL_FILES:
            questions = archive.read(f"bfcl_eval/data/BFCL_v4_{stem}.json").decode()
            answers = archive.read(f"bfcl_eval/data/possible_answer/BFCL_v4_{stem}.json").decode()
            functions: dict[str, dict[str, dict[str, Any]]] = {}  # by question id
            for line in questions.splitlines():
                question = json.loads(line)
                functions[question["id"]] = {f["name"]: f for f in question.get("function", [])}
            for line in answers.splitlines():
                answer = json.loads(line)
                offered = functions.get(answer["id"], {})
                for truth in answer["ground_truth"]:
                    for name, options in truth.items():
                        if name not in offered:
                            continue
                        schema = _standard(offered[name]["parameters"])
                        key = json.dumps([name, schema], sort_keys=True)
                        calls.setdefault(key, (name, schema, _first_answer(options)))
    return list(calls.values())


# --- timing ---------------------------------------------------------------------------


def cpu_us(call: Callable[[], Any], count: int) -> float:
    start = time.thread_time_ns()
    for _ in range(count):
        call()
    return (time.thread_time_ns() - start) / count / 1000


def workload_cases() -> list[tuple[str, dict[str, Check | None], str]]:
    by_key = {w.key: w for w in WORKLOADS}
    add = compile_all("add", ADD_SCHEMA)
    meeting = compile_all("schedule_meeting", SCHEDULE_SCHEMA)
    cases = [
        ("W1", add, by_key["W1"].arguments),
        ("W2", meeting, by_key["W2"].arguments),
        ("W3", meeting, by_key["W3"].arguments),
    ]
    # W4 is a name lookup: only the floor (a dict) and toolbridge have a registry here
    names = {"add": add, "schedule_meeting": meeting}
    registry = toolbridge.ToolRegistry([_SchemaTool("schedule_meeting", SCHEDULE_SCHEMA)])
    w4: dict[str, Check | None] = dict.fromkeys(CANDIDATES)
    w4["floor"] = lambda text: names.get("schedule_meting") is not None
    w4["toolbridge"] = lambda text: registry.prepare_call("schedule_meting", text).error is None
    cases.append(("W4", w4, by_key["W4"].arguments))
    return cases


def probes() -> dict[str, dict[str, str]]:
    """What each candidate decides on the documented rules' edge cases."""
    add = compile_all("add", ADD_SCHEMA)
    meeting = compile_all("schedule_meeting", SCHEDULE_SCHEMA)
    attendees = '[{"name": "a", "email": "b"}]'
    questions = {
        '"1.0" for an integer (refused: not lossless)': (add, '{"a": "1.0", "b": 2}', False),
        '"1e3" for an integer (refused)': (add, '{"a": "1e3", "b": 2}', False),
        "true for an integer (refused)": (add, '{"a": true, "b": 2}', False),
        "a duplicate key (refused)": (add, '{"a": 1, "a": 2, "b": 3}', False),
        '"60" for an integer (cast to 60)': (add, '{"a": "60", "b": 2}', True),
        "a date-time that is not one (refused: format)": (
            meeting,
            '{"title": "t", "start": "noon", "priority": "high", "attendees": ' + attendees + "}",
            False,
        ),
    }
    table: dict[str, dict[str, str]] = {}
    for question, (checks, text, wanted) in questions.items():
        row: dict[str, str] = {}
        for candidate in CANDIDATES:
            check = checks[candidate]
            if check is None:
                row[candidate] = "cannot express"
                continue
            accepted = check(text)
            verdict = "accepts" if accepted else "refuses"
            row[candidate] = verdict + ("" if accepted == wanted else " (breaks the rule)")
        table[question] = row
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", help="the bfcl-eval wheel (its data files are read)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=300, help="calls per timed batch (W1-W4)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    report: dict[str, Any] = {"load_before": load_before, "workloads": {}, "bfcl": {}}

    cases = workload_cases()
    samples: dict[tuple[str, str], list[float]] = {}
    bfcl = bfcl_calls(args.wheel)
    sets: dict[str, list[tuple[dict[str, Check | None], str]]] = {"valid": [], "cast": []}
    expressible = dict.fromkeys(CANDIDATES, 0)
    registered = 0
    for name, schema, arguments in bfcl:
        try:
            check_parameters_schema(schema, owner=name)
            checks = compile_all(name.replace(".", "_")[:64], schema)
        except (toolbridge.ToolDefinitionError, ValueError):
            continue
        registered += 1
        for candidate in CANDIDATES:
            expressible[candidate] += checks[candidate] is not None
        valid = json.dumps(arguments)
        # timed only where every candidate can express the schema: the same calls for all
        if all(checks.values()) and checks["floor"] is not None and checks["floor"](valid):
            sets["valid"].append((checks, valid))
            cast = json.dumps(_as_text(arguments))
            if cast != valid and checks["toolbridge"] is not None and checks["toolbridge"](cast):
                sets["cast"].append((checks, cast))
    accepted: dict[tuple[str, str], int] = {}
    for _ in range(args.rounds):
        for key, checks, text in cases:
            for candidate in CANDIDATES:
                check = checks[candidate]
                if check is not None:
                    gc.collect()
                    us = cpu_us(lambda c=check, t=text: c(t), args.calls)
                    samples.setdefault((key, candidate), []).append(us)
        for set_name, items in sets.items():
            for candidate in CANDIDATES:
                chosen = [(c[candidate], t) for c, t in items]
                gc.collect()
                start = time.thread_time_ns()
                ok = sum(bool(check(text)) for check, text in chosen if check is not None)
                spent = (time.thread_time_ns() - start) / max(len(chosen), 1) / 1000
                samples.setdefault((f"bfcl {set_name}", candidate), []).append(spent)
                accepted[(set_name, candidate)] = ok
    report["load_after"] = os.getloadavg()
    report["registered"] = registered
    report["expressible"] = expressible
    report["sizes"] = {name: len(items) for name, items in sets.items()}
    report["accepted"] = {f"{s} {c}": n for (s, c), n in accepted.items()}
    report["median_us"] = {f"{k} | {c}": statistics.median(v) for (k, c), v in samples.items()}
    report["min_us"] = {f"{k} | {c}": min(v) for (k, c), v in samples.items()}
    report["probes"] = probes()
    json.dump(report, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
