"""Compiled candidates for issue 22 §3: each one's numbers on W1-W4 and real BFCL schemas.

    python3.11 bench/core_candidates.py [--rounds N] [--no-docs]

Builds bench/.venvs/candidates (this repository editable, plus orjson and msgspec from
PyPI), fetches the bfcl-eval wheel once (`pip download --no-deps`: only its data files
are read, nothing of it is installed or imported), runs bench/core/candidates.py in that
environment and writes the section "Core: compiled candidates" of docs/benchmarks.md,
with the load average printed. Install cost: each candidate's wheel size for CPython 3.11
on this platform, as pip downloaded it. This is not a test: the test suite never runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from core_bench import DOCS, REPO, RUNNERS, VENVS, Peer, ensure_venv, log, machine

SECTION = "## Core: compiled candidates (issue 22 §3)"
CANDIDATES = Peer("candidates", "candidates.py", ("-e", str(REPO), "orjson", "msgspec"))
BFCL = "bfcl-eval==2026.3.23"
LABELS = {
    "floor": "floor: `json.loads` + jsonschema-rs `is_valid`",
    "toolbridge": "toolbridge `prepare_call`",
    "orjson": "orjson + jsonschema-rs `is_valid`",
    "pydantic-core": "pydantic-core `validate_json` (lax)",
    "msgspec": "msgspec `Decoder(strict=False)`",
}
PACKAGES = {"orjson": "orjson", "pydantic-core": "pydantic-core", "msgspec": "msgspec"}


def wheel(python: Path, requirement: str, folder: Path) -> Path:
    """The wheel of `requirement` for this interpreter (downloaded once into `folder`)."""
    name = requirement.split("=", maxsplit=1)[0].replace("-", "_")
    found = sorted(folder.glob(f"{name}-*.whl")) if folder.exists() else []
    if not found:
        command = [str(python), "-m", "pip", "download", "--quiet", "--no-deps"]
        subprocess.run([*command, "-d", str(folder), requirement], check=True)
        found = sorted(folder.glob(f"{name}-*.whl"))
    return found[-1]


def render(report: dict[str, Any], info: dict[str, Any], sizes: dict[str, float]) -> str:
    median, fastest = report["median_us"], report["min_us"]
    keys = ["W1", "W2", "W3", "W4", "bfcl valid", "bfcl cast"]
    lines = [
        SECTION,
        "",
        f"Measured {info['date']} on {info['cpu']} ({info['cores']} cores), toolbridge at "
        f"`{info['toolbridge_revision']}`. Command: `python3.11 bench/core_candidates.py`. "
        f"**The machine was loaded**: load average {report['load_before'][0]:.2f} before and "
        f"{report['load_after'][0]:.2f} after, on {info['cores']} cores shared with other work. "
        "CPU µs per call of this thread, median over the interleaved rounds (fastest round "
        "in brackets), every candidate in one process; compare the ratios against the floor, "
        "not the absolute numbers.",
        "",
        f"BFCL v4 ({BFCL}): {report['registered']} distinct function schemas register; "
        f"{report['sizes']['valid']} of them, which every candidate can express, are called "
        "with their ground-truth arguments (`bfcl valid`), and "
        f"{report['sizes']['cast']} of those with every number and boolean sent as text "
        "(`bfcl cast`, which toolbridge casts). Schemas each candidate can express: "
        + ", ".join(f"{c} {n}" for c, n in report["expressible"].items())
        + ".",
        "",
        "| candidate | " + " | ".join(keys) + " | wheel |",
        "| --- | " + " | ".join("---" for _ in keys) + " | --- |",
    ]
    for candidate, label in LABELS.items():
        cells = []
        for key in keys:
            value = median.get(f"{key} | {candidate}")
            floor = median.get(f"{key} | floor")
            if value is None:
                cells.append("-")
                continue
            ratio = f", {value / floor:.2f}x" if floor else ""
            cells.append(f"{value:.2f} ({fastest[f'{key} | {candidate}']:.2f}){ratio}")
        size = f"{sizes[candidate]:.1f} MB" if candidate in sizes else "-"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {size} |")
    lines += [
        "",
        "Accepted calls (of the timed BFCL calls): "
        + ", ".join(f"{key} {count}" for key, count in report["accepted"].items())
        + ".",
        "",
        "What each candidate decides on the documented rules' edge cases:",
        "",
        "| case | " + " | ".join(LABELS) + " |",
        "| --- | " + " | ".join("---" for _ in LABELS) + " |",
    ]
    for question, row in report["probes"].items():
        lines.append(f"| {question} | " + " | ".join(row[c] for c in LABELS) + " |")
    lines += ["", *VERDICT]
    return "\n".join(lines) + "\n"


VERDICT = (
    "Notes and verdict:",
    "",
    "- W4 (an unknown name) has no registry in orjson, pydantic-core or msgspec; the floor's "
    "W4 here is one dict lookup. The floor and orjson cannot cast, so they refuse almost every "
    "`bfcl cast` call; toolbridge refuses the few BFCL calls whose ground truth holds a key "
    "the schema lacks (an object without `additionalProperties` is closed by toolbridge's "
    "rule); pydantic-core and msgspec cannot express the schemas outside the common subset "
    "(`anyOf`, `$ref`, `pattern`, bounds ...), which would go to the general path.",
    "- Install cost: every candidate is a prebuilt wheel for CPython 3.11 on x86-64 Linux "
    "(no Rust toolchain, the README's two commands unchanged); pydantic-core and "
    "jsonschema-rs are dependencies already. A PyO3 extension of toolbridge's own would "
    "need a Rust toolchain at install, or wheels built and published per platform: not "
    "measured.",
    '- None keeps every documented rule (the table above): pydantic-core casts `"1.0"` '
    'and `true` to integers, msgspec `"1.0"` and `"1e3"`; neither checks `format`, '
    "refuses duplicate keys, logs a repair, or reports every error with its path, and each "
    "would need the general path behind it for what it cannot express. So none is shipped. "
    "Only msgspec is fast enough to give 5x over the fastest peer, and only by dropping "
    "those rules.",
)


def write_section(section: str) -> None:
    """Replace (or append) only this section of docs/benchmarks.md."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.find(SECTION + "\n")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        following = text.find("\n## ", start + len(SECTION))
        rest = "" if following == -1 else "\n" + text[following + 1 :]
        text = text[:start] + section + rest
    DOCS.write_text(text, encoding="utf-8")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    python = ensure_venv(CANDIDATES, reinstall=False)
    wheels = VENVS / "candidates" / "wheels"
    bfcl = wheel(python, BFCL, wheels)
    sizes = {
        candidate: wheel(python, package, wheels).stat().st_size / 1e6
        for candidate, package in PACKAGES.items()
    }
    info = machine()
    log(f"load average {os.getloadavg()[0]:.2f}: timing the candidates")
    command = [str(python), str(RUNNERS / CANDIDATES.runner), str(bfcl)]
    done = subprocess.run(
        [*command, "--rounds", str(args.rounds)], capture_output=True, text=True, check=True
    )
    report = json.loads(done.stdout)
    section = render(report, info, sizes)
    print(section)
    if not args.no_docs:
        write_section(section)
        log(f"updated {DOCS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
