"""ToolLoader: package scan, entry-point plugins from a real installed distribution,
scopes, enabled/create, per-tool config, clashes and broken plugins."""

from __future__ import annotations

import logging
import sys
import textwrap
from pathlib import Path

import pytest

from toolbridge import ToolConfigError, ToolContext, ToolLoader

BUILTINS = {
    "__init__.py": "",
    "alpha.py": '''
        from pydantic import BaseModel
        from toolbridge import Tool, tool

        class AlphaConfig(BaseModel):
            retries: int = 1

        class Alpha(Tool):
            name = "alpha"
            description = "built-in alpha"
            config_key = "alpha"

            @classmethod
            def config_cls(cls):
                return AlphaConfig

            @classmethod
            def create(cls, ctx):
                made = cls()
                made.retries = ctx.tool_config.retries
                made.workspace = ctx.workspace
                return made

            async def execute(self, **kwargs):
                return "alpha"

        @tool(read_only=True)
        async def beta() -> str:
            """Built-in beta."""
            return "beta"
    ''',
    "scoped.py": """
        from toolbridge import Tool

        class OnlyForSubagents(Tool):
            name = "subagent_only"
            scopes = frozenset({"subagent"})

        class Everywhere(Tool):
            name = "everywhere"
            scopes = frozenset({"*"})

        class Disabled(Tool):
            name = "disabled"

            @classmethod
            def enabled(cls, ctx):
                return ctx.config.get("enable_disabled", False)
    """,
    "_private.py": """
        from toolbridge import Tool

        class Hidden(Tool):
            name = "hidden"
    """,
    "broken.py": "raise RuntimeError('this built-in module is broken')\n",
}

PLUGIN = """
    from toolbridge import Tool

    class GoodTool(Tool):
        name = "plugin_good"
        description = "from a plugin"

    class AlphaClash(Tool):
        name = "alpha"
        description = "plugin alpha that must not shadow the built-in"

    class Exploding(Tool):
        name = "exploding"

        @classmethod
        def create(cls, ctx):
            raise OSError("cannot connect to the plugin's service")

    class First(Tool):
        name = "listed_one"

    class Second(Tool):
        name = "listed_two"

    TOOLS = [First, Second()]
    not_a_tool = 42
"""

ENTRY_POINTS = """
    [toolbridge_test.tools]
    good = tbtest_plugin:GoodTool
    clash = tbtest_plugin:AlphaClash
    exploding = tbtest_plugin:Exploding
    listed = tbtest_plugin:TOOLS
    not_a_tool = tbtest_plugin:not_a_tool
    missing = tbtest_plugin_missing:Thing
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real site directory: a built-in package and an installed plugin distribution."""
    root = tmp_path / "site"
    _write(root / "tbtest_builtins", BUILTINS)
    _write(root, {"tbtest_plugin.py": PLUGIN})
    dist_info = root / "tbtest_plugin-1.0.dist-info"
    _write(
        dist_info,
        {
            "METADATA": "Metadata-Version: 2.1\nName: tbtest-plugin\nVersion: 1.0\n",
            "entry_points.txt": ENTRY_POINTS,
            "top_level.txt": "tbtest_plugin\n",
        },
    )
    (dist_info / "RECORD").write_text("")
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in list(sys.modules):
        if name.startswith("tbtest_"):
            del sys.modules[name]


def make_loader() -> ToolLoader:
    return ToolLoader(package="tbtest_builtins", group="toolbridge_test.tools")


def test_the_plugin_is_a_real_installed_distribution(site: Path) -> None:
    from importlib import metadata

    dist = metadata.distribution("tbtest-plugin")
    assert dist.version == "1.0"
    assert {ep.name for ep in dist.entry_points} >= {"good", "clash"}


def test_loads_builtins_and_plugins_builtins_win(
    site: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loader = make_loader()
    with caplog.at_level(logging.WARNING, logger="toolbridge.core.loader"):
        tools = loader.load(ToolContext(workspace=tmp_path))
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {
        "alpha",
        "beta",
        "everywhere",
        "plugin_good",
        "listed_one",
        "listed_two",
    }
    assert by_name["alpha"].description == "built-in alpha"  # not the plugin's
    assert by_name["alpha"].workspace == tmp_path  # type: ignore[attr-defined]
    assert by_name["beta"].read_only
    reasons = {s.source.split(" ")[-1].strip("()"): s.reason for s in loader.skipped}
    assert "clashes" in reasons["tbtest_plugin:AlphaClash"]
    assert "cannot connect" in reasons["tbtest_plugin:Exploding"]
    assert "not a Tool" in reasons["tbtest_plugin:not_a_tool"]
    assert "import failed" in reasons["tbtest_plugin_missing:Thing"]
    assert any("broken" in s.source and "import failed" in s.reason for s in loader.skipped)
    assert "skipping" in caplog.text


def test_scopes_and_enabled(site: Path) -> None:
    sub = {t.name for t in make_loader().load(scope="subagent")}
    assert "subagent_only" in sub and "everywhere" in sub and "alpha" not in sub
    enabled = {t.name for t in make_loader().load(ToolContext(config={"enable_disabled": True}))}
    assert "disabled" in enabled


def test_tool_config_is_validated_and_errors_name_tool_and_field(site: Path) -> None:
    tools = make_loader().load(ToolContext(config={"alpha": {"retries": "3"}}))
    alpha = next(t for t in tools if t.name == "alpha")
    assert alpha.retries == 3  # type: ignore[attr-defined]
    with pytest.raises(ToolConfigError, match=r"tool 'alpha'.*field 'retries'"):
        make_loader().load(ToolContext(config={"alpha": {"retries": "many"}}))


def test_registry_from_loader(site: Path, tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path)
    registry = make_loader().registry(ctx)
    assert registry.context is ctx
    assert "plugin_good" in registry and "alpha" in registry


def test_builtin_package_holds_only_valid_tools() -> None:
    loader = ToolLoader()
    candidates = loader.discover()
    assert loader.skipped == []  # every built-in module imports
    names = [getattr(c, "name", None) for _, c in candidates]
    assert all(isinstance(n, str) and n for n in names)
    assert len(names) == len(set(names))


def test_a_tool_that_refuses_its_configuration_is_an_error_not_a_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(
        tmp_path / "tbtest_strict",
        {
            "__init__.py": "",
            "strict.py": """
                from toolbridge import Tool, ToolConfigError

                class NeedsSandbox(Tool):
                    name = "needs_sandbox"

                    @classmethod
                    def create(cls, ctx):
                        raise ToolConfigError("tool 'needs_sandbox': bubblewrap is not installed")
            """,
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ToolConfigError, match="bubblewrap is not installed"):
            ToolLoader(package="tbtest_strict", group="toolbridge_test.none").load()
    finally:
        for name in list(sys.modules):
            if name.startswith("tbtest_strict"):
                del sys.modules[name]


def test_a_workspace_given_as_text_is_a_path(tmp_path: Path) -> None:
    from toolbridge import ToolContext

    ctx = ToolContext(workspace=str(tmp_path))  # type: ignore[arg-type]
    assert ctx.workspace == tmp_path
    registry = ToolLoader().registry(ctx)  # every built-in tool builds (exec used to crash)
    assert "exec" in registry and "read_file" in registry
