"""Resident memory of a fresh process: at start, after `import toolbridge`, after 100 tools.

The 100 function tools are distinct async functions (their own names, parameter
names and types, and docstrings), registered in one `ToolRegistry`, so every schema
is built, checked and compiled. Prints one JSON document on stdout.

    bench/.venvs/toolbridge/bin/python bench/core/memory_toolbridge.py
"""

from __future__ import annotations

import json
import resource
import sys
from typing import Any

_TYPES = ("str", "int", "float", "bool", "list[str]", "dict[str, int]")


def vm_rss_mb() -> float:
    """Current resident set size (VmRSS) of this process in MiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line in /proc/self/status")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_function(index: int) -> Any:
    """Async function number `index`, with three parameters of varying types and a docstring."""
    first, second = _TYPES[index % len(_TYPES)], _TYPES[(index + 1) % len(_TYPES)]
    source = (
        f"async def tool_{index:03d}(query_{index}: {first}, option_{index}: {second}, "
        f"limit: int = {index}) -> str:\n"
        f'    """Tool number {index}.\n\n    Args:\n'
        f"        query_{index}: what to look for.\n"
        f"        option_{index}: how to look.\n"
        f"        limit: at most this many results.\n"
        f'    """\n'
        f"    return str(query_{index})\n"
    )
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    return namespace[f"tool_{index:03d}"]


def main() -> None:
    stages = {"python started": vm_rss_mb()}
    functions = [make_function(i) for i in range(100)]
    stages["100 functions defined"] = vm_rss_mb()

    import toolbridge

    stages["import toolbridge"] = vm_rss_mb()
    registry = toolbridge.ToolRegistry()
    for function in functions:
        registry.register(toolbridge.tool(function))
    registry.get_definitions()
    stages["100 function tools registered"] = vm_rss_mb()
    report = {
        "python": sys.version.split()[0],
        "tools": len(registry),
        "vm_rss_mb": stages,
        "peak_rss_mb": peak_rss_mb(),
        "loaded_modules": len(sys.modules),
    }
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
