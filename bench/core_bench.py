"""Core benchmark: per-call cost of prepare + execute, toolbridge side by side with its peers.

Run it from the repository root with Python 3.11 (nothing else needed; it builds one
virtual environment per peer under bench/.venvs/, from PyPI, on the first run):

    python3.11 bench/core_bench.py

Options: --repetitions N (default 21), --rounds N (default 7), --batch-ms MS (default 60),
--only PEER ..., --profile (add a cProfile of toolbridge's W1/W2 path), --no-docs (do not
touch docs/benchmarks.md), --reinstall (rebuild the peer environments), --render FILE
(write the docs section again from a saved bench/results file, running nothing).

Each peer and the floor run in their own process and interpreter (bench/core/peer_*.py),
one after the other so they never compete for the CPU, in rounds (every peer once per
round) so that a burst of load from elsewhere hits all of them alike. Every case is
timed as batches of N sequential awaits in one event loop; the table shows the median
of all repetitions in microseconds per call with the min-max spread. Results go to
docs/benchmarks.md (section "Core: prepare + execute per call"), raw JSON to
bench/results/. toolbridge is an editable install: it measures the working tree.
This is not a test: the test suite never runs it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
RUNNERS = BENCH / "core"
VENVS = BENCH / ".venvs"
RESULTS = BENCH / "results"
DOCS = REPO / "docs" / "benchmarks.md"
SECTION = "## Core: prepare + execute per call"
WORKLOAD_KEYS = ("W1", "W2", "W3", "W4", "W1s")


@dataclass(frozen=True, slots=True)
class Peer:
    """A peer's runner script and what its virtual environment needs."""

    key: str
    runner: str
    requirements: tuple[str, ...]


PEERS = (
    Peer("toolbridge", "peer_toolbridge.py", ("-e", str(REPO))),
    Peer("pydantic_ai", "peer_pydantic_ai.py", ("pydantic-ai-slim",)),
    Peer("mcp", "peer_mcp.py", ("mcp",)),
    Peer("langchain", "peer_langchain.py", ("langchain-core",)),
    Peer("openai_agents", "peer_openai_agents.py", ("openai-agents",)),
    Peer("nanobot", "peer_nanobot.py", ("nanobot-ai",)),
    Peer("floor", "peer_floor.py", ("jsonschema-rs",)),
)
PEER_KEYS = tuple(peer.key for peer in PEERS)
COMPETITORS = ("pydantic_ai", "mcp", "langchain", "openai_agents", "nanobot")


# --- environments -------------------------------------------------------------------


def venv_python(peer: Peer) -> Path:
    return VENVS / peer.key / "bin" / "python"


def ensure_venv(peer: Peer, *, reinstall: bool) -> Path:
    """Create bench/.venvs/<peer> with its requirements unless it already has exactly them."""
    root = VENVS / peer.key
    marker = root / ".bench-requirements"
    wanted = "\n".join(peer.requirements)
    if reinstall and root.exists():
        shutil.rmtree(root)
    if marker.exists() and marker.read_text() == wanted:
        return venv_python(peer)
    log(f"setting up {root.relative_to(REPO)}: pip install {' '.join(peer.requirements)}")
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    pip = [str(venv_python(peer)), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *peer.requirements], check=True)
    marker.write_text(wanted)
    return venv_python(peer)


# --- running ------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[core_bench] {message}", file=sys.stderr, flush=True)


def run_json(python: Path, script: str, *args: str) -> dict[str, Any]:
    """Run a bench/core script in its own process and parse the JSON it prints."""
    command = [str(python), str(RUNNERS / script), *args]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"{script} failed with exit code {done.returncode}:\n{tail}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(
                line.split(":", 1)[1].strip() for line in info if line.startswith("model name")
            )
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_before": os.getloadavg(),
        "toolbridge_revision": git_revision(),
    }


def git_revision() -> str:
    """The commit of the measured working tree, marked ``-dirty`` with uncommitted changes."""
    command = ["git", "describe", "--always", "--dirty", "--abbrev=12"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


# --- reading the results ------------------------------------------------------------


def case(reports: dict[str, Any], peer: str, workload: str, variant: str | None = None) -> Any:
    """The result of one peer's workload (its first variant unless `variant` is given)."""
    for result in reports.get(peer, {}).get("cases", []):
        if result["workload"] == workload and variant in (None, result["variant"]):
            return result
    return None


def cell(result: Any) -> str:
    if result is None:
        return "n/a"
    mark = "" if result["outcome"] == "ok" else " err"
    return f"{result['median_us']:.1f} ({result['min_us']:.1f}–{result['max_us']:.1f}){mark}"


def ratio(numerator: Any, denominator: Any, stat: str = "median_us") -> float | None:
    if numerator is None or denominator is None:
        return None
    return float(numerator[stat]) / float(denominator[stat])


def targets(reports: dict[str, Any], stat: str = "median_us") -> list[tuple[str, str, str]]:
    """Each target of the issues: (target, measured, met?), by `stat` (median or min)."""
    rows: list[tuple[str, str, str]] = []
    for workload in ("W1", "W2", "W3"):
        ours = case(reports, "toolbridge", workload, "execute")
        peers = [case(reports, peer, workload) for peer in COMPETITORS]
        measured = [p for p in peers if p is not None]
        if ours is None or not measured:
            continue
        fastest = min(measured, key=lambda r: r[stat])
        owner = next(k for k in COMPETITORS if case(reports, k, workload) is fastest)
        speedup = float(fastest[stat]) / float(ours[stat])
        rows.append(
            (
                f"{workload}: ≥ 5x faster than the fastest peer",
                f"{speedup:.2f}x ({ours[stat]:.1f} vs {owner} {fastest[stat]:.1f} µs)",
                "yes" if speedup >= 5 else "no",
            )
        )
    for workload in ("W1", "W2"):
        ours = case(reports, "toolbridge", workload, "execute")
        floor = case(reports, "floor", workload, "+ jsonschema-rs")
        factor = ratio(ours, floor, stat)
        if factor is not None:
            rows.append(
                (
                    f"{workload}: ≤ 3x the floor with jsonschema-rs",
                    f"{factor:.2f}x ({ours[stat]:.1f} vs {floor[stat]:.1f} µs)",
                    "yes" if factor <= 3 else "no",
                )
            )
    sync_async = [
        ("execute", "W1s on a worker thread"),
        ("execute, inline=True", "W1s inline (`@tool(inline=True)`)"),
    ]
    for variant, label in sync_async:
        factor = ratio(
            case(reports, "toolbridge", "W1s", variant), case(reports, "toolbridge", "W1"), stat
        )
        if factor is not None:
            rows.append(
                (
                    f"{label} vs async W1 (issue 8 §7, ≤ 1.5x inline)",
                    f"{factor:.2f}x",
                    ("yes" if factor <= 1.5 else "no") if "inline" in variant else "-",
                )
            )
    for workload in ("W3", "W4"):
        ours = case(reports, "toolbridge", workload, "execute")
        measured = [(k, r) for k in COMPETITORS if (r := case(reports, k, workload)) is not None]
        if ours is None or not measured:
            continue
        owner, fastest = min(measured, key=lambda item: item[1][stat])
        speedup = float(fastest[stat]) / float(ours[stat])
        rows.append(
            (
                f"{workload} (error): faster than every peer (issue 22)",
                f"{speedup:.2f}x ({ours[stat]:.1f} vs {owner} {fastest[stat]:.1f} µs)",
                "yes" if speedup > 1 else "no",
            )
        )
    # Issue 22 asks W2 as a dict at or below 6 µs, in a run whose floor (json +
    # jsonschema-rs) took 1.7 µs: on a shared machine that is a ratio, 6 / 1.7.
    w2 = case(reports, "toolbridge", "W2", "execute, dict")
    floor_w2 = case(reports, "floor", "W2", "+ jsonschema-rs")
    factor = ratio(w2, floor_w2, stat)
    if factor is not None:
        rows.append(
            (
                "W2 as a dict: ≤ 3.5x the floor with jsonschema-rs (issue 22's 6 µs at its "
                "floor of 1.7 µs)",
                f"{factor:.2f}x ({w2[stat]:.1f} vs {floor_w2[stat]:.1f} µs)",
                "yes" if factor <= 6 / 1.7 else "no",
            )
        )
    for error_path, valid in (("W3", "W2"), ("W4", "W1")):
        error = case(reports, "toolbridge", error_path, "execute")
        ok = case(reports, "toolbridge", valid, "execute")
        factor = ratio(error, ok, stat)
        if factor is not None:
            rows.append(
                (
                    f"{error_path} (error) ≤ 2x a valid call ({valid})",
                    f"{factor:.2f}x ({error[stat]:.1f} vs {ok[stat]:.1f} µs)",
                    "yes" if factor <= 2 else "no",
                )
            )
    return rows


# --- the markdown section -----------------------------------------------------------


def render(run: dict[str, Any]) -> str:
    reports: dict[str, Any] = run["reports"]
    settings = next(iter(reports.values()))["settings"] if reports else {}
    info = run["machine"]
    lines = [
        SECTION,
        "",
        f"Measured {info['date']} on {info['cpu']} ({info['cores']} cores), "
        f"{info['platform']}, Python {run['python']}, load average "
        f"{info['load_before'][0]:.2f} before and {info['load_after'][0]:.2f} after, "
        f"toolbridge at `{info['toolbridge_revision']}`. "
        "Command: `python3.11 bench/core_bench.py`.",
        "",
        "CPU µs per call (the process's CPU time, every thread counted: on a shared "
        "machine wall time mostly measures the wait for a core; the raw results keep "
        "the wall time too), "
        f"median of {settings.get('repetitions', '?')} repetitions in "
        f"{run['rounds']} interleaved rounds (min–max), "
        f"each a batch of sequential awaits in one event loop lasting about "
        f"{settings.get('batch_ms', '?')} ms, after a warm-up. Each row ran in its own "
        "process and virtual environment. `err` marks a call that came back as an error "
        "(expected for W3 and W4). Lower is better. The machine is shared: compare "
        "ratios within this one interleaved run, not absolute numbers across runs.",
        "",
        f"Load average during the run: {info['load_before'][0]:.2f} before, "
        f"{info['load_after'][0]:.2f} after (cores: {info['cores']})"
        + (
            ": **the machine was loaded**, so read the ratios, not the µs."
            if max(info["load_before"][0], info["load_after"][0]) > (info["cores"] or 1)
            else "."
        ),
        "",
        "| Implementation | Path | W1 | W2 | W3 | W4 | W1s (sync) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for peer in PEER_KEYS:
        report = reports.get(peer)
        if report is None:
            continue
        variants = dict.fromkeys(result["variant"] for result in report["cases"])
        for variant in variants:
            cells = [cell(case(reports, peer, key, variant)) for key in WORKLOAD_KEYS]
            lines.append(f"| {report['label']} | `{variant}` | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Workloads (10 tools registered everywhere: the two below and 8 one-parameter fillers; "
        "the typed peers also register `add_sync`):",
        "",
        "- W1 `add(a: int, b: int)` called with `" + run["workloads"]["W1"] + "`.",
        "- W2 `schedule_meeting(title: str, start: datetime, priority: Priority, "
        "attendees: list[Attendee])`, 5 attendees `{name, email}`.",
        '- W3 the W2 call without `start` and with `priority: "urgent"` (not in the enum).',
        "- W4 the unknown name `schedule_meting` (a typo of `schedule_meeting`).",
        "- W1s the W1 call of `add_sync`, the same `add` as a plain sync function: each "
        "peer's own path for sync tools (toolbridge: a worker thread by default, or "
        "`@tool(inline=True)` on the loop; nanobot's tools are async classes and the floor "
        "has no tool runner, so they have no W1s).",
        "",
        "### Targets (issues 2 and 22)",
        "",
        "By the median, and by the fastest repetition (the least disturbed one: on a "
        "loaded machine the median mostly measures the other processes).",
        "",
        "| Target | Measured (median) | Met | Measured (fastest repetition) | Met |",
        "| --- | --- | --- | --- | --- |",
    ]
    by_min = {target: (measured, met) for target, measured, met in targets(reports, "min_us")}
    lines += [
        f"| {target} | {measured} | {met} | {' | '.join(by_min.get(target, ('n/a', '-')))} |"
        for target, measured, met in targets(reports)
    ]
    lines += ["", "### What each call returned", ""]
    lines += ["| Implementation | W1 | W3 | W4 |", "| --- | --- | --- | --- |"]
    for peer in PEER_KEYS:
        if peer not in reports:
            continue
        shown = [case(reports, peer, key) for key in ("W1", "W3", "W4")]
        texts = [
            "n/a" if r is None else f"{r['outcome']}: `{shorten(r['detail'], 70)}`" for r in shown
        ]
        lines.append(f"| {reports[peer]['label']} | " + " | ".join(texts) + " |")
    lines += ["", "### Versions", ""]
    for peer in PEER_KEYS:
        if peer in reports:
            packages = ", ".join(f"{k} {v}" for k, v in reports[peer]["packages"].items())
            lines.append(f"- {reports[peer]['label']}: {packages}")
    notes = [
        f"{reports[peer]['label']}: {note}"
        for peer in PEER_KEYS
        if peer in reports
        for note in reports[peer]["notes"]
    ]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {note}" for note in notes]
    memory = run.get("memory")
    if memory:
        stages = memory["vm_rss_mb"]
        lines += [
            "",
            "### Memory (fresh process, VmRSS)",
            "",
            "| Stage | RSS (MiB) |",
            "| --- | --- |",
        ]
        lines += [f"| {stage} | {mib:.1f} |" for stage, mib in stages.items()]
        final = stages["100 function tools registered"]
        met = "met" if final < 40 else "not met"
        lines += [
            "",
            f"Peak RSS {memory['peak_rss_mb']:.1f} MiB, {memory['loaded_modules']} modules "
            f"loaded. Target < 40 MiB after import + 100 tools: {met} ({final:.1f} MiB, "
            f"{final * 1.048576:.1f} MB).",
        ]
    return "\n".join(lines) + "\n"


def shorten(text: str, limit: int) -> str:
    text = text.replace("|", "\\|").replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def write_section(section: str) -> None:
    """Replace (or append) only this benchmark's section of docs/benchmarks.md."""
    text = DOCS.read_text(encoding="utf-8") if DOCS.exists() else "# Benchmarks\n"
    start = text.find(SECTION + "\n")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        following = text.find("\n## ", start + len(SECTION))
        rest = "" if following == -1 else "\n" + text[following + 1 :]
        text = text[:start] + section + rest
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    DOCS.write_text(text, encoding="utf-8")


# --- main ---------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=21)
    parser.add_argument("--batch-ms", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=7, help="interleave peers over N rounds")
    parser.add_argument("--only", nargs="+", choices=PEER_KEYS, default=list(PEER_KEYS))
    parser.add_argument("--profile", action="store_true", help="cProfile toolbridge's W1/W2")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    parser.add_argument("--reinstall", action="store_true", help="rebuild bench/.venvs/*")
    parser.add_argument(
        "--render", type=Path, help="write the docs section from a saved bench/results file"
    )
    args = parser.parse_args(argv)
    if args.repetitions < 5:
        parser.error("--repetitions must be at least 5")
    if not 1 <= args.rounds <= args.repetitions:
        parser.error("--rounds must be between 1 and --repetitions")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.render is not None:
        saved: dict[str, Any] = json.loads(args.render.read_text(encoding="utf-8"))
        write_section(render(saved))
        log(f"updated {DOCS.relative_to(REPO)} from {args.render}")
        return 0
    run: dict[str, Any] = {
        "machine": machine(),
        "python": platform.python_version(),
        "workloads": workloads_by_key(),
        "rounds": args.rounds,
        "reports": {},
        "failures": {},
    }
    peers = [peer for peer in PEERS if peer.key in args.only]
    pythons = {peer.key: ensure_venv(peer, reinstall=args.reinstall) for peer in peers}
    per_round = -(-args.repetitions // args.rounds)
    for round_number in range(1, args.rounds + 1):
        for peer in peers:
            if peer.key in run["failures"]:
                continue
            log(f"round {round_number}/{args.rounds}: timing {peer.key}")
            try:
                report = run_json(
                    pythons[peer.key], peer.runner, str(per_round), str(args.batch_ms)
                )
            except RuntimeError as exc:
                log(str(exc))
                run["failures"][peer.key] = str(exc)
                run["reports"].pop(peer.key, None)
                continue
            run["reports"][peer.key] = merge(run["reports"].get(peer.key), report)
    run["machine"]["load_after"] = os.getloadavg()
    if "toolbridge" in args.only:
        toolbridge_python = venv_python(PEERS[0])
        log("measuring memory")
        run["memory"] = run_json(toolbridge_python, "memory_toolbridge.py")
        if args.profile:
            log("profiling toolbridge")
            command = [str(toolbridge_python), str(RUNNERS / "profile_toolbridge.py")]
            profile = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True)
            run["profile"] = profile.stdout
    section = render(run)
    print(section)
    if run.get("profile"):
        print(run["profile"])
    return publish(run, "core", section, None if args.no_docs else write_section, log)


def publish(
    run: dict[str, Any],
    prefix: str,
    text: str,
    write: Callable[[str], None] | None,
    say: Callable[[str], None],
) -> int:
    """Save the raw results; then write `text` into the docs, unless a runner failed."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    raw = RESULTS / f"{prefix}-{stamp}.json"
    raw.write_text(json.dumps(run, indent=2), encoding="utf-8")
    say(f"raw results: {raw.relative_to(REPO)}")
    if run["failures"]:
        say(f"not updating {DOCS.relative_to(REPO)}: {', '.join(run['failures'])} failed")
        return 1
    if write is not None:
        write(text)
        say(f"updated {DOCS.relative_to(REPO)}")
    return 0


def merge(earlier: dict[str, Any] | None, report: dict[str, Any]) -> dict[str, Any]:
    """Add one round's samples to the earlier rounds' and recompute median, min and max."""
    if earlier is None:
        return report
    for old, new in zip(earlier["cases"], report["cases"], strict=True):
        samples = old["samples_us"] + new["samples_us"]
        old["wall_samples_us"] = old.get("wall_samples_us", []) + new.get("wall_samples_us", [])
        old.update(
            samples_us=samples,
            median_us=statistics.median(samples),
            min_us=min(samples),
            max_us=max(samples),
            repetitions=len(samples),
        )
    earlier["settings"]["repetitions"] = earlier["cases"][0]["repetitions"]
    return earlier


def workloads_by_key() -> dict[str, str]:
    sys.path.insert(0, str(RUNNERS))
    from workloads import ALL_WORKLOADS

    return {workload.key: workload.arguments for workload in ALL_WORKLOADS}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
