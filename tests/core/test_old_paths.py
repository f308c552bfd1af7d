"""Old module paths, from before the stage folders: each still imports, with every name it had.

All 31 modules that sat at the top of the package keep their path (a DeprecationWarning
says where they went). ``toolbridge.results``, ``toolbridge.schema`` and
``toolbridge.approval`` each also lost names to another module (`to_tool_result` went to
``toolbridge.core.results``, `FrozenDict` to ``toolbridge.core.frozen``, ...): an upgrading
user's ``from toolbridge.results import to_tool_result`` must keep working, with a warning
that says where that name lives now. Run in a fresh interpreter, as a user's program runs
(the suite turns the old paths' warning into an error).
"""

from __future__ import annotations

import subprocess
import sys

# The top level of the package before the stage folders (its face and __main__ aside).
TOP_LEVEL_BEFORE = (
    "approval", "calls", "errors", "exec_sessions", "executor", "fs", "function_tool",
    "grep_worker", "html", "images", "isolation", "jsondata", "jsontext", "loader",
    "loop_guard", "naming", "outcomes", "patches", "pathlocks", "process", "progress",
    "registry", "results", "scheduling", "schema", "signature", "supervisor", "terminal",
    "tool", "tool_search", "tracing",
)  # fmt: skip

# Each old path's __all__ before the move, and where each of those names lives now.
BEFORE = {
    "toolbridge.results": {
        "EMPTY_RESULT": "toolbridge.core.results",
        "MalformedResult": "toolbridge.core.results",
        "check_result": "toolbridge.core.results",
        "estimate_tokens": "toolbridge.core.results",
        "image_media_type": "toolbridge.core.results",
        "text_length": "toolbridge.core.results",
        "to_tool_result": "toolbridge.core.results",
        "PAGER_TOOL": "toolbridge.execution.result_store",
        "PAGE_METADATA_KEY": "toolbridge.execution.result_store",
        "RESULTS_DIR": "toolbridge.execution.result_store",
        "SAVED_METADATA_KEY": "toolbridge.execution.result_store",
        "ResultPage": "toolbridge.execution.result_store",
        "ResultStore": "toolbridge.execution.result_store",
        "cap_result": "toolbridge.execution.result_store",
        "preview_text": "toolbridge.execution.result_store",
        "private_results_root": "toolbridge.execution.result_store",
        "safe_file_name": "toolbridge.execution.result_store",
    },
    "toolbridge.schema": {
        "EMPTY_OBJECT_SCHEMA": "toolbridge.core.schema",
        "Checked": "toolbridge.core.schema",
        "CompiledSchema": "toolbridge.core.schema",
        "check_parameters_schema": "toolbridge.core.schema",
        "FrozenDict": "toolbridge.core.frozen",
        "FrozenList": "toolbridge.core.frozen",
        "freeze": "toolbridge.core.frozen",
        "thaw": "toolbridge.core.frozen",
    },
    "toolbridge.approval": {
        "BY_DECISION": "toolbridge.execution.approval",
        "ApprovalRequest": "toolbridge.execution.approval",
        "ApprovalRule": "toolbridge.execution.approval",
        "Approvals": "toolbridge.execution.approval",
        "approval_required_error": "toolbridge.core.registry",
        "arguments_digest": "toolbridge.execution.approval",
        "canonical_arguments": "toolbridge.execution.approval",
        "requires_approval_flag": "toolbridge.execution.approval",
        "writes_need_approval": "toolbridge.execution.approval",
    },
}


def run(program: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", program], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done


def test_every_module_of_the_old_top_level_still_imports_from_its_path() -> None:
    done = run(
        "import importlib, warnings\n"
        "warnings.simplefilter('always', DeprecationWarning)\n"
        f"for name in {TOP_LEVEL_BEFORE!r}:\n"
        "    module = importlib.import_module(f'toolbridge.{name}')\n"
        "    assert module.__file__, name\n"
    )
    for name in TOP_LEVEL_BEFORE:
        assert f"toolbridge.{name} moved to toolbridge." in done.stderr, name


def test_every_name_an_old_path_exported_still_imports_from_it() -> None:
    run(
        "import importlib, warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        f"before = {BEFORE!r}\n"
        "for old, names in before.items():\n"
        "    module = importlib.import_module(old)\n"
        "    for name, home in names.items():\n"
        "        value = getattr(module, name)\n"
        "        assert value is getattr(importlib.import_module(home), name), (old, name)\n"
        "    star = {}\n"
        "    exec(f'from {old} import *', star)\n"
        "    assert set(names) <= set(star), (old, set(names) - set(star))\n"
        "from toolbridge.results import to_tool_result, ResultStore\n"
        "from toolbridge.schema import FrozenDict, CompiledSchema\n"
        "from toolbridge.approval import approval_required_error, Approvals\n"
        # a pickle written before the move names the class by its old module
        "import pickle\n"
        "from toolbridge.core.frozen import FrozenDict as Frozen\n"
        "data = pickle.dumps(Frozen(a=1), protocol=0)\n"
        "old = data.replace(b'toolbridge.core.frozen', b'toolbridge.schema')\n"
        "assert old != data and type(pickle.loads(old)) is Frozen\n"
    )


def test_the_warning_says_where_the_names_that_left_live_now() -> None:
    done = run(
        "import warnings\n"
        "warnings.simplefilter('default', DeprecationWarning)\n"
        "from toolbridge.results import to_tool_result\n"
    )
    assert "toolbridge.results moved to toolbridge.execution.result_store" in done.stderr
    assert "to_tool_result" in done.stderr and "toolbridge.core.results" in done.stderr


def test_a_name_an_old_path_never_had_fails_naming_that_path() -> None:
    done = run(
        "import warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "try:\n"
        "    from toolbridge.results import no_such_name\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert "no_such_name" in done.stdout and "toolbridge.results" in done.stdout


def test_setting_a_name_through_an_old_path_sets_it_where_it_lives() -> None:
    # as monkeypatch.setattr("toolbridge.results.RESULTS_DIR", ...) does in a user's tests
    run(
        "import warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "import toolbridge.results as old\n"
        "from toolbridge.core import results\n"
        "from toolbridge.execution import result_store\n"
        "old.RESULTS_DIR = 'elsewhere'\n"
        "assert result_store.RESULTS_DIR == 'elsewhere'\n"
        "old.EMPTY_RESULT = 'nothing'\n"
        "assert results.EMPTY_RESULT == 'nothing' and old.EMPTY_RESULT == 'nothing'\n"
        "del old.EMPTY_RESULT\n"
        "assert not hasattr(results, 'EMPTY_RESULT')\n"
    )


def test_reloading_the_package_face_keeps_one_old_path_finder() -> None:
    # as a development tool's reload does; a second finder would answer every old path twice
    run(
        "import importlib, sys, warnings\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "import toolbridge\n"
        "importlib.reload(toolbridge)\n"
        "importlib.reload(toolbridge)\n"
        "finders = [f for f in sys.meta_path if type(f).__name__ == '_MovedModules']\n"
        "assert len(finders) == 1, finders\n"
        "from toolbridge.results import to_tool_result, ResultStore\n"
        "assert ResultStore is toolbridge.ResultStore\n"
    )
