"""Where one call's microseconds go: each step of `prepare_call` + `run_prepared`, timed alone.

W1 (text to cast), W2 (a valid dict) and W3 (an invalid dict) are split into the steps
the registry takes, each timed on its own, with the floor (`json.loads` + jsonschema-rs
`is_valid`) in the same interleaved rounds. CPU time of this thread, so the numbers
mean the same on a loaded machine as far as CPU time can; read the ratios.

    bench/.venvs/toolbridge/bin/python bench/core/steps_toolbridge.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import inspect
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import jsonschema_rs
from peer_toolbridge import build_registry
from workloads import ADD_SCHEMA, SCHEDULE_SCHEMA, WORKLOADS

from toolbridge.core.calls import decode_arguments
from toolbridge.core.casting import CastState
from toolbridge.core.jsondata import json_data_issues, leaves_look_plain, text_may_hide_problems
from toolbridge.core.schema_issues import capped, castable, render_errors


def steps() -> dict[str, Callable[[], Any]]:
    registry = build_registry()
    by_key = {w.key: w for w in WORKLOADS}
    w1 = by_key["W1"].arguments
    w2 = json.loads(by_key["W2"].arguments)
    w3 = json.loads(by_key["W3"].arguments)
    add = registry._entries["add"]
    meeting = registry._entries["schedule_meeting"]
    floor_add = jsonschema_rs.validator_for(ADD_SCHEMA)
    floor_meeting = jsonschema_rs.validator_for(SCHEDULE_SCHEMA)
    w1_args = json.loads(w1)
    errors = list(meeting.schema._validator.iter_errors(w3))
    prepared = registry.prepare_call("add", w1)

    async def run_prepared() -> Any:
        return await registry.run_prepared(prepared)

    async def run_nothing() -> None:
        return None

    return {
        "floor W1: json.loads + is_valid": lambda: floor_add.is_valid(json.loads(w1)),
        "W1 prepare_call": lambda: registry.prepare_call("add", w1),
        "W1 . decode_arguments": lambda: decode_arguments(w1),
        "W1 . text_may_hide_problems": lambda: text_may_hide_problems(w1),
        "W1 . cast pass": lambda: add.schema._caster(w1_args, (), CastState()),
        "W1 . is_valid (cast value)": lambda: add.schema._validator.is_valid({"a": 1, "b": 2}),
        "W1 run_prepared (add)": run_prepared,
        "(await of an empty coroutine)": run_nothing,
        "floor W2 dict: is_valid": lambda: floor_meeting.is_valid(w2),
        "W2 dict prepare_call": lambda: registry.prepare_call("schedule_meeting", w2),
        "W2 . leaves_look_plain (marshal)": lambda: leaves_look_plain(w2),
        "W2 . is_valid": lambda: meeting.schema._validator.is_valid(w2),
        "W2 . convert_arguments (pydantic)": lambda: meeting.tool.convert_arguments(w2),
        "W3 dict prepare_call": lambda: registry.prepare_call("schedule_meeting", w3),
        "W3 . json_data_issues (the walk)": lambda: json_data_issues(w3),
        "W3 . iter_errors (jsonschema-rs)": lambda: list(
            itertools.islice(meeting.schema._validator.iter_errors(w3), 21)
        ),
        "W3 . castable?": lambda: any(castable(error) for error in errors),
        "W3 . issues rendered": lambda: capped(list(render_errors(errors, set()))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    load_before = os.getloadavg()
    cases = steps()
    samples: dict[str, list[float]] = {name: [] for name in cases}

    async def awaited(call: Callable[[], Any], count: int) -> int:
        start = time.thread_time_ns()
        for _ in range(count):
            await call()
        return time.thread_time_ns() - start

    loop = asyncio.new_event_loop()
    for _ in range(args.rounds):
        for name, call in cases.items():
            gc.collect()
            if inspect.iscoroutinefunction(call):
                spent = loop.run_until_complete(awaited(call, args.calls))
            else:
                start = time.thread_time_ns()
                for _ in range(args.calls):
                    call()
                spent = time.thread_time_ns() - start
            samples[name].append(spent / args.calls / 1000)
    loop.close()
    load_after = os.getloadavg()
    print(f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after (loaded machine)")
    print("| step | CPU µs, median | fastest round |")
    print("| --- | --- | --- |")
    for name, values in samples.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} |")


if __name__ == "__main__":
    main()
