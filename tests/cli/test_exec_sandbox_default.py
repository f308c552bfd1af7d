"""The CLI's default for the exec tool's ``unsandboxed`` setting: refuse, unless opted in.

Tested on the config mapping the CLI builds (the field's effect is the exec tool's
business): a stand-in tool class reads the ``exec`` section with a model that has the
field, as the built-in one does.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from toolbridge import Tool
from toolbridge.cli.loading import _CliLoader, _exec_default
from toolbridge.core.loader import Candidate


class WithField(BaseModel):
    unsandboxed: Literal["approve", "allow", "refuse"] = "approve"


class WithoutField(BaseModel):
    shell: str = "/bin/sh"


def _tool(model: type[BaseModel]) -> type[Tool]:
    class Shell(Tool):
        name = "exec"
        description = "A shell."

        @classmethod
        def config_cls(cls) -> type[BaseModel]:
            return model

    return Shell


class _Loader(_CliLoader):
    def __init__(self, *candidates: Candidate) -> None:
        super().__init__()
        self._builtins = [("test", c) for c in candidates]


def _section(loader: _CliLoader, config: dict[str, Any], allow: bool) -> Any:
    tools = {key: dict(value) for key, value in config.items()}
    _exec_default(loader, tools, allow)
    return tools.get("exec")


def test_refuse_by_default_allow_with_the_flag_and_the_file_wins_over_the_default() -> None:
    loader = _Loader(_tool(WithField))
    assert _section(loader, {}, allow=False) == {"unsandboxed": "refuse"}
    assert _section(loader, {}, allow=True) == {"unsandboxed": "allow"}
    written = {"exec": {"unsandboxed": "allow", "shell": "/bin/bash"}}
    assert _section(loader, written, allow=False) == written["exec"]
    refused = {"exec": {"unsandboxed": "refuse"}}
    assert _section(loader, refused, allow=True) == {"unsandboxed": "allow"}


def test_nothing_is_written_for_a_tool_that_does_not_know_the_field() -> None:
    assert _section(_Loader(_tool(WithoutField)), {}, allow=False) is None
    both = _Loader(_tool(WithField), _tool(WithoutField))
    assert _section(both, {"exec": {"shell": "/bin/sh"}}, allow=True) == {"shell": "/bin/sh"}
