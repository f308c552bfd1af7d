"""Command-line start-up benchmark: ``toolbridge --version``, ``--help`` and a missing key.

Run it from the repository root in the project's environment:

    python bench/cli_bench.py            # prints the table and updates docs/benchmarks.md
    python bench/cli_bench.py --no-docs  # prints only
    python bench/cli_bench.py --before a95ffdb  # also the same cases at an older commit

Each case is a fresh process, as a user starts it (the ``toolbridge`` console script
next to this Python), run round by round interleaved with ``python -c pass`` (the
interpreter's own start, the floor), like hyperfine's repeated runs. Reported: the
median wall time, and the median CPU time (user + system, from the kernel's accounting
of the finished child), which depends less on how busy the machine is; each as a ratio
to ``python -c pass`` of the same run. Targets (issue 19): ``--version`` and ``--help``
under 150 ms, a missing key reported in under 1 s (the key is checked before the
provider's SDK loads). Not a test: the suite never runs it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION = "## Command line start-up (`python bench/cli_bench.py`)"
FLOOR = "python -c pass"
TARGETS_MS = {"toolbridge --version": 150.0, "toolbridge --help": 150.0}
MISSING_KEY = "toolbridge agent hi (no OPENAI_API_KEY)"
TARGETS_MS[MISSING_KEY] = 1000.0


# What the console script runs, for the sources of an older commit on PYTHONPATH.
LAUNCHER = "import sys; from toolbridge.cli import main; sys.argv[0] = 'toolbridge'; main()"


def cases(workspace: Path, before: Path | None) -> dict[str, tuple[list[str], dict[str, str], int]]:
    """Name -> (argv, environment, expected exit code); with `before` (an older commit's
    ``src``), each toolbridge case again at that commit."""
    script = [str(Path(sys.executable).with_name("toolbridge"))]
    env = dict(os.environ)
    table = {FLOOR: ([sys.executable, "-c", "pass"], env, 0)}
    versions = [("", script, env)]
    if before is not None:
        old = {**env, "PYTHONPATH": str(before)}
        versions.append((" (before)", [sys.executable, "-c", LAUNCHER], old))
    for suffix, launch, environment in versions:
        bare = {k: v for k, v in environment.items() if not k.startswith("OPENAI_")}
        agent = [*launch, "agent", "hi", "--workspace", str(workspace), "--no-skills"]
        table[f"toolbridge --version{suffix}"] = ([*launch, "--version"], environment, 0)
        table[f"toolbridge --help{suffix}"] = ([*launch, "--help"], environment, 0)
        table[f"{MISSING_KEY}{suffix}"] = (agent, bare, 2)
    return table


def sources_at(commit: str, into: Path) -> Path:
    """The ``src`` folder of `commit`, extracted under `into`."""
    archive = subprocess.run(
        ["git", "archive", commit, "src"], capture_output=True, check=True, cwd=DOCS.parents[1]
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def run_once(argv: list[str], env: dict[str, str], expected: int) -> tuple[float, float]:
    """Wall and CPU milliseconds of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, check=False)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != expected:
        raise SystemExit(f"{argv}: exit {done.returncode}, expected {expected}: {done.stderr!r}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def measure(rounds: int, before: str | None) -> dict[str, tuple[float, float]]:
    with tempfile.TemporaryDirectory() as folder:
        old = sources_at(before, Path(folder)) if before is not None else None
        workspace = Path(folder) / "workspace"
        workspace.mkdir()
        table = cases(workspace, old)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in table}
        for argv, env, code in table.values():  # warm the file cache once
            run_once(argv, env, code)
        for _ in range(rounds):
            for name, (argv, env, code) in table.items():
                samples[name].append(run_once(argv, env, code))
    return {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in samples.items()
    }


def report(
    medians: dict[str, tuple[float, float]], rounds: int, load: str, before: str | None
) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    base_wall, base_cpu = medians[FLOOR]
    lines = [
        SECTION,
        "",
        f"Measured {now} on {platform.processor() or platform.machine()}, "
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} "
        f"cores, load average {load} (before the run). {rounds} rounds, cases interleaved; "
        "medians. CPU is user + system time of the process, which depends less on how "
        "busy the machine is than wall time."
        + (f" `(before)`: the same at commit {before}." if before else ""),
        "",
        f"| Case | wall ms | vs `{FLOOR}` | CPU ms | vs `{FLOOR}` | target (wall) | met |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, (wall, cpu) in medians.items():
        target = None if name.endswith("(before)") else TARGETS_MS.get(name)
        shown = f"< {target:.0f} ms" if target is not None else "-"
        met = "-" if target is None else ("yes" if wall < target else "no")
        lines.append(
            f"| `{name}` | {wall:.0f} | {wall / base_wall:.1f}x | {cpu:.0f} | "
            f"{cpu / base_cpu:.1f}x | {shown} | {met} |"
        )
    lines += [
        "",
        "Start-up imports nothing heavy: the script enters through `_toolbridge_cli` "
        "(which only sets up Ctrl-C), `import toolbridge` loads each public name on "
        "first use, the command line loads a command's module only when that command "
        "runs (the help lists them without loading them), and `--version` is answered "
        "before typer loads (tests/cli/test_start_up.py checks which modules each loads: "
        "no typer, rich or pydantic for `--version`, no rich or pydantic for `--help`, no "
        "SDK for a missing key). What is left of the missing key is mostly typer itself, "
        "which loads pydantic to read a command's options. On a loaded machine wall time "
        "grows with the load; the CPU ratios are the comparable part.",
        "",
    ]
    return "\n".join(lines)


def update_docs(section: str) -> None:
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOCS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    parser.add_argument("--before", help="also measure the sources of this commit")
    args = parser.parse_args()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"load average {load}", file=sys.stderr)
    section = report(measure(args.rounds, args.before), args.rounds, load, args.before)
    print(section)
    if not args.no_docs:
        update_docs(section)


if __name__ == "__main__":
    main()
