"""W5 against the peers: a batch of N concurrency-safe 5 ms calls, every peer in one run.

Run it from the repository root with Python 3.11:

    python3.11 bench/w5_bench.py

It reuses the per-peer virtual environments of bench/core_bench.py (bench/.venvs/<peer>,
built from PyPI on first use). Options: --rounds N (default 5), --repetitions N batches
per size per round (default 8), --sizes N ... (default 50 200 800), --only PEER ...,
--no-docs (do not touch docs/benchmarks.md).

Each peer runs bench/core/w5_<peer>.py in its own process and interpreter, one after the
other, in rounds (every peer once per round) so that load from elsewhere hits them
alike. The tool is the same everywhere: async, awaits asyncio.sleep(0.005), returns a
short string, declared concurrency-safe where the peer has such a notion. A runner
times its peer's batch path (see each runner's docstring) and a bare asyncio.gather in
the same process; the floor's process does only the bare gather, and every ratio is
against it. The tables go into docs/benchmarks.md as the "### W5 against the peers"
subsection of "## Executor" (bench/executor_bench.py rewrites that section: run this
after it), raw JSON to bench/results/. Not a test: the test suite never runs it.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core_bench import PEERS, ensure_venv, machine, publish, run_json

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
DOCS = REPO / "docs" / "benchmarks.md"
SECTION = "## Executor"
HEADING = "### W5 against the peers"
OLD_PARAGRAPH = "The peers' W5 numbers come from"  # bench/executor_bench.py's placeholder
OWN_GATHER = "bare asyncio.gather (this process)"  # w5_harness.OWN_GATHER
COMMAND = "python3.11 bench/w5_bench.py"


@dataclass(frozen=True, slots=True)
class Runner:
    key: str
    script: str
    # What each timed path is, for the table: variant name -> description.
    paths: dict[str, str]


RUNNERS = (
    Runner(
        "toolbridge",
        "w5_toolbridge.py",
        {
            "ToolExecutor.run": "the batch planned as one concurrent run, default policy",
            "ToolExecutor.run, tracing off": "the same with `ExecutionPolicy(tracing=False)`",
        },
    ),
    Runner(
        "nanobot",
        "w5_nanobot.py",
        {
            "execute_tool_calls(concurrent=True)": (
                "the function `AgentRunner` runs a response's tool calls with, called "
                "with the runner's arguments (`read_only` tool)"
            ),
        },
    ),
    Runner(
        "mcp",
        "w5_mcp.py",
        {
            "gather of MCPServer.call_tool": (
                "server side, no transport: N `json.loads` + `call_tool` under one gather "
                "(the SDK has no batch path: one request, one task per call)"
            ),
        },
    ),
    Runner(
        "pydantic_ai",
        "w5_pydantic_ai.py",
        {
            "agent step (CallToolsNode)": (
                "`Agent.iter` over a `FunctionModel`; only the node that runs the N calls "
                "(`process_tool_calls`, parallel mode) is timed"
            ),
            "gather of ToolManager.handle_call": (
                "the `ToolManager` alone, N `handle_call`s under one gather"
            ),
        },
    ),
    Runner(
        "openai_agents",
        "w5_openai_agents.py",
        {
            "agent turn (Runner.run, tool phase)": (
                "`Runner.run` over `ScriptedModel`, timed from `on_llm_end` to the next "
                "`on_llm_start` (tracing disabled)"
            ),
            "execute_function_tool_calls": (
                "the run loop's batch function (`agents.run_internal`, internal) called directly"
            ),
            "gather of FunctionTool.on_invoke_tool": (
                "N single calls under one gather, no batch machinery"
            ),
        },
    ),
    Runner("floor", "w5_floor.py", {OWN_GATHER: "`asyncio.gather` of N calls of the tool"}),
)
NOTES = (
    "nanobot: `AgentRunner` has no `_execute_tools` in this version; `_run_core` passes a "
    "response's calls to `nanobot.agent.tools.execution.execute_tool_calls` (with "
    "`concurrent=True` from the agent loop), which is called here directly, no model.",
    "MCP SDK: there is no batch path to drive; the row is the server-side per-call work "
    "gathered, what a server does for N concurrent `tools/call` requests minus the transport.",
    "pydantic-ai: `process_tool_calls` needs the agent graph's run context, so the agent "
    "step is driven through the public `Agent.iter` with pydantic-ai's own `FunctionModel`.",
    "OpenAI Agents SDK: the batch function is internal (`agents.run_internal`), so it is "
    "timed directly and also through the public `Runner.run` with the SDK's `ScriptedModel`; "
    "the agent-turn row includes the rest of the turn's tool phase around the batch.",
    "langchain-core is left out: it has no batch path (an agent built on it gathers "
    "`ainvoke` calls itself).",
    "Runners: `bench/core/w5_<peer>.py`, timing harness `bench/core/w5_harness.py`; each "
    "runner's docstring says exactly which path it drives. Every batch is checked: the "
    "tool ran N times and N results carry its text.",
)
RUNNER_KEYS = tuple(runner.key for runner in RUNNERS)
PEER_BY_KEY = {peer.key: peer for peer in PEERS}


# --- running ------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[w5_bench] {message}", file=sys.stderr, flush=True)


def merge(earlier: dict[str, Any] | None, report: dict[str, Any]) -> dict[str, Any]:
    """Add one round's samples to the earlier rounds'."""
    if earlier is None:
        return report
    for old, new in zip(earlier["cases"], report["cases"], strict=True):
        assert (old["variant"], old["size"]) == (new["variant"], new["size"])
        old["samples_ms"] += new["samples_ms"]
    return earlier


def summarise(report: dict[str, Any]) -> None:
    for case in report["cases"]:
        samples = case["samples_ms"]
        case.update(
            median_ms=statistics.median(samples),
            min_ms=min(samples),
            max_ms=max(samples),
            batches=len(samples),
        )


def case(reports: dict[str, Any], peer: str, variant: str, size: int) -> Any:
    for result in reports.get(peer, {}).get("cases", []):
        if result["variant"] == variant and result["size"] == size:
            return result
    return None


# --- the markdown subsection --------------------------------------------------------


def label(peer: str) -> str:
    return {
        "toolbridge": "toolbridge",
        "nanobot": "nanobot",
        "mcp": "MCP SDK",
        "pydantic_ai": "pydantic-ai",
        "openai_agents": "OpenAI Agents SDK",
        "floor": "floor",
    }[peer]


def rows(reports: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(peer, variant, description) in table order, the floor first."""
    order = [runner for runner in RUNNERS if runner.key == "floor"]
    order += [runner for runner in RUNNERS if runner.key != "floor"]
    return [
        (runner.key, variant, description)
        for runner in order
        if runner.key in reports
        for variant, description in runner.paths.items()
    ]


def render(run: dict[str, Any]) -> str:
    reports: dict[str, Any] = run["reports"]
    info = run["machine"]
    sizes: list[int] = run["sizes"]
    main = 200 if 200 in sizes else sizes[len(sizes) // 2]
    floors = {size: case(reports, "floor", OWN_GATHER, size) for size in sizes}
    batches = next(iter(reports.values()))["cases"][0]["batches"] if reports else 0
    lines = [
        HEADING,
        "",
        f"Measured {info['date']} on {info['cpu']} ({info['cores']} cores), "
        f"{info['platform']}, Python {run['python']}, load average "
        f"{info['load_before'][0]:.2f} before and {info['load_after'][0]:.2f} after, "
        f"toolbridge at `{info['toolbridge_revision']}`. Command: `{COMMAND}`.",
        "",
        "One model turn asking for N calls of one tool that awaits `asyncio.sleep(0.005)` "
        "and returns a short string (concurrency-safe wherever the peer has the notion), "
        "arguments `{}`. Every peer ran in its own process and virtual environment, "
        f"{run['rounds']} interleaved rounds of {run['repetitions']} batches per path and "
        f"size after a warm-up: ms per batch, median of {batches} batches (min–max). "
        "`vs floor` is against the floor process's median at the same N; the last column "
        "is a bare gather timed inside the peer's own process (and the path against it), "
        "as a check on the floor. No model and no network: where the batch path sits "
        "inside an agent run, an in-process stand-in model drives it and only the tool "
        "phase is timed.",
        "",
        f"#### N = {main}",
        "",
        "| Implementation | Path | What is timed | ms per batch | vs floor "
        "| bare gather in its process |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    floor = floors.get(main)
    for peer, variant, description in rows(reports):
        result = case(reports, peer, variant, main)
        if result is None:
            continue
        own = case(reports, peer, OWN_GATHER, main)
        factor = f"{result['median_ms'] / floor['median_ms']:.2f}x" if floor else "n/a"
        lines.append(
            f"| {label(peer)} | `{variant}` | {description} | {result['median_ms']:.1f} "
            f"({result['min_ms']:.1f}–{result['max_ms']:.1f}) | {factor} "
            f"| {own['median_ms']:.1f} ({result['median_ms'] / own['median_ms']:.2f}x) |"
        )
    lines += scaling(reports, sizes, floors)
    ours = case(reports, "toolbridge", "ToolExecutor.run", main)
    if ours is not None and floor is not None:
        factor = ours["median_ms"] / floor["median_ms"]
        own = case(reports, "toolbridge", OWN_GATHER, main)
        met = "met" if factor <= 1.3 else "not met"
        lines += [
            "",
            f"Target: ToolExecutor.run within 1.3x of the bare gather at N = {main}: "
            f"{met} against the floor process ({factor:.2f}x); "
            f"{ours['median_ms'] / own['median_ms']:.2f}x the gather in its own process.",
        ]
    lines += ["", "Versions:", ""]
    for peer in RUNNER_KEYS:
        if peer in reports:
            report = reports[peer]
            packages = ", ".join(f"{k} {v}" for k, v in report["packages"].items())
            lines.append(
                f"- {label(peer)}: Python {report['python']}"
                + (f", {packages}" if packages else "")
            )
    lines += ["", "Notes:", ""] + [f"- {note}" for note in NOTES]
    return "\n".join(lines) + "\n"


def scaling(reports: dict[str, Any], sizes: list[int], floors: dict[int, Any]) -> list[str]:
    """Median ms at each N, then µs per call above the floor (flat means linear)."""
    lines = [
        "",
        "#### Scaling with N",
        "",
        "Median ms per batch at each N, then the cost above the floor process per call "
        "in µs, ((median − floor median) / N): flat means the path grows linearly with N, "
        "growing means faster than linearly.",
        "",
        "| Implementation | Path | "
        + " | ".join(f"N = {n} ms" for n in sizes)
        + " | "
        + " | ".join(f"µs/call above floor, N = {n}" for n in sizes)
        + " |",
        "| --- | --- | " + " | ".join("---" for _ in range(2 * len(sizes))) + " |",
    ]
    for peer, variant, _description in rows(reports):
        results = [case(reports, peer, variant, n) for n in sizes]
        if any(result is None for result in results):
            continue
        totals = [f"{result['median_ms']:.1f}" for result in results]
        above = [
            "n/a"
            if floors.get(n) is None
            else f"{(result['median_ms'] - floors[n]['median_ms']) * 1000 / n:.1f}"
            for n, result in zip(sizes, results, strict=True)
        ]
        lines.append(f"| {label(peer)} | `{variant}` | " + " | ".join(totals + above) + " |")
    return lines


def write_subsection(subsection: str) -> None:
    """Put the subsection in "## Executor": in place of its earlier copy or of the old
    paragraph quoting the issue's numbers, else at the end of the section."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.find(SECTION + "\n")
    if start == -1:
        raise SystemExit(f"{DOCS} has no {SECTION!r} section: run bench/executor_bench.py first")
    following = text.find("\n## ", start + len(SECTION))
    end = len(text) if following == -1 else following + 1
    section = text[start:end]
    earlier = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^### |\Z)", re.S | re.M)
    paragraph = re.compile(rf"^{re.escape(OLD_PARAGRAPH)}.*?\n(\n|\Z)", re.S | re.M)
    if earlier.search(section):
        section = earlier.sub(lambda _: subsection + "\n", section, count=1)
    elif paragraph.search(section):
        section = paragraph.sub(lambda _: subsection + "\n", section, count=1)
    else:
        section = section.rstrip("\n") + "\n\n" + subsection + "\n"
    DOCS.write_text(text[:start] + section + text[end:], encoding="utf-8")


# --- main ---------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repetitions", type=int, default=8, help="batches per round")
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 800])
    parser.add_argument("--only", nargs="+", choices=RUNNER_KEYS, default=list(RUNNER_KEYS))
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.repetitions < 1:
        parser.error("--rounds and --repetitions must be at least 1")
    if "floor" not in args.only:
        args.only.append("floor")  # every ratio needs it
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    run: dict[str, Any] = {
        "machine": machine(),
        "python": platform.python_version(),
        "sizes": args.sizes,
        "rounds": args.rounds,
        "repetitions": args.repetitions,
        "reports": {},
        "failures": {},
    }
    runners = [runner for runner in RUNNERS if runner.key in args.only]
    pythons = {r.key: ensure_venv(PEER_BY_KEY[r.key], reinstall=False) for r in runners}
    sizes = ",".join(str(size) for size in args.sizes)
    for round_number in range(1, args.rounds + 1):
        for runner in runners:
            if runner.key in run["failures"]:
                continue
            log(f"W5 round {round_number}/{args.rounds}: {runner.key}")
            try:
                report = run_json(pythons[runner.key], runner.script, str(args.repetitions), sizes)
            except RuntimeError as exc:
                log(str(exc))
                run["failures"][runner.key] = str(exc)
                run["reports"].pop(runner.key, None)
                continue
            run["reports"][runner.key] = merge(run["reports"].get(runner.key), report)
    run["machine"]["load_after"] = os.getloadavg()
    for report in run["reports"].values():
        summarise(report)
    subsection = render(run)
    print(subsection)
    return publish(run, "w5", subsection, None if args.no_docs else write_subsection, log)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
