"""`Workspace.resolve`: kernel-accurate resolution, whole-component containment, clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolbridge.core.errors import ToolExecutionError, WorkspaceViolation
from toolbridge.security.workspace import InvalidPath, Workspace


def test_relative_paths_resolve_under_the_root(guard: Workspace, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("x")
    assert guard.resolve("src/app.py") == workspace / "src" / "app.py"
    assert guard.resolve("./src/./app.py") == workspace / "src" / "app.py"
    assert guard.resolve(".") == workspace
    assert guard.resolve(str(workspace / "src")) == workspace / "src"


@pytest.mark.parametrize(
    "path", ["..", "../outside/secret.txt", "src/../../outside", "/etc/passwd", "/", "../../.."]
)
def test_paths_that_leave_the_workspace_are_violations(guard: Workspace, path: str) -> None:
    (guard.root / "src").mkdir(exist_ok=True)
    with pytest.raises(WorkspaceViolation) as caught:
        guard.resolve(path)
    assert caught.value.target == path
    assert "outside the workspace" in caught.value.message


def test_prefix_sibling_is_not_inside(tmp_path: Path, guard: Workspace) -> None:
    evil = tmp_path / "workspace-evil"
    evil.mkdir()
    (evil / "x.txt").write_text("evil")
    for path in ("../workspace-evil/x.txt", str(evil / "x.txt"), str(evil)):
        with pytest.raises(WorkspaceViolation):
            guard.resolve(path)


def test_symlinked_directory_to_outside_is_a_violation(
    guard: Workspace, workspace: Path, outside: Path
) -> None:
    (workspace / "link").symlink_to(outside)
    with pytest.raises(WorkspaceViolation):
        guard.resolve("link/secret.txt")
    with pytest.raises(WorkspaceViolation):
        guard.resolve("link")


def test_dotdot_after_a_directory_symlink_is_resolved_like_the_kernel(
    guard: Workspace, workspace: Path, outside: Path
) -> None:
    deep = workspace / "sub" / "deep"
    deep.mkdir(parents=True)
    (workspace / "jump").symlink_to(deep)
    # Lexically jump/../file is ./file; the kernel goes to sub/deep/.. = sub.
    assert guard.resolve("jump/../file") == workspace / "sub" / "file"

    (outside / "inner").mkdir()
    (workspace / "out").symlink_to(outside / "inner")
    # Lexically out/../x stays inside; the kernel lands in outside/x.
    with pytest.raises(WorkspaceViolation):
        guard.resolve("out/../secret.txt")


def test_relative_symlink_inside_is_followed(guard: Workspace, workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "a.md").write_text("a")
    (workspace / "alias").symlink_to("docs")
    assert guard.resolve("alias/a.md") == workspace / "docs" / "a.md"


def test_new_file_resolves_through_its_deepest_existing_ancestor(
    guard: Workspace, workspace: Path, outside: Path
) -> None:
    assert guard.resolve("new/dir/file.txt") == workspace / "new" / "dir" / "file.txt"
    (workspace / "dangling-out").symlink_to(outside / "not-yet.txt")
    with pytest.raises(WorkspaceViolation):
        guard.resolve("dangling-out")
    (workspace / "dangling-in").symlink_to(workspace / "later.txt")
    assert guard.resolve("dangling-in") == workspace / "later.txt"


def test_dotdot_out_of_a_missing_directory_is_an_error(guard: Workspace) -> None:
    with pytest.raises(ToolExecutionError, match="does not exist"):
        guard.resolve("missing/../x")


def test_a_file_used_as_a_directory_is_an_error(guard: Workspace, workspace: Path) -> None:
    (workspace / "README").write_text("r")
    for path in ("README/x", "README/.."):
        with pytest.raises(ToolExecutionError, match="not a directory"):
            guard.resolve(path)


def test_nul_byte_is_invalid_input_not_a_violation(guard: Workspace) -> None:
    with pytest.raises(InvalidPath, match="NUL") as caught:
        guard.resolve("notes.txt\x00.png")
    assert not isinstance(caught.value, WorkspaceViolation)


@pytest.mark.parametrize("path", ["C:\\Windows\\win.ini", "c:/x", "D:", "\\\\server\\share\\x"])
def test_backslashes_and_drive_letters_are_ordinary_name_characters(
    guard: Workspace, workspace: Path, path: str
) -> None:
    """On POSIX a backslash is a name character: a UNC-looking path is one file name."""
    assert guard.resolve(path) == workspace / path
    guard.write_atomic(guard.resolve(path), b"x")
    assert (workspace / path).read_bytes() == b"x"


def test_lone_surrogate_is_an_error(guard: Workspace) -> None:
    with pytest.raises(InvalidPath, match=r"lone surrogate \(U\+DCFF\)"):
        guard.resolve("bad\udcffname")


def test_over_long_names_and_paths_are_errors(guard: Workspace) -> None:
    with pytest.raises(InvalidPath, match="at most 255 bytes"):
        guard.resolve("a" * 256)
    with pytest.raises(InvalidPath, match="at most 255 bytes"):
        guard.resolve("é" * 128)  # 256 bytes in UTF-8
    with pytest.raises(InvalidPath, match="at most 4095 bytes"):
        guard.resolve("/".join(["d" * 200] * 21))
    with pytest.raises(InvalidPath, match="empty"):
        guard.resolve("")


def test_symlink_loops_are_errors(guard: Workspace, workspace: Path) -> None:
    (workspace / "self").symlink_to("self")
    (workspace / "ping").symlink_to("pong")
    (workspace / "pong").symlink_to("ping")
    for path in ("self", "ping/x", "pong"):
        with pytest.raises(ToolExecutionError, match="symlink loop"):
            guard.resolve(path)


def test_leading_tilde_is_expanded(
    guard: Workspace, workspace: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = workspace / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert guard.resolve("~/notes.txt") == home / "notes.txt"
    assert guard.resolve("~") == home
    monkeypatch.setenv("HOME", str(outside))
    with pytest.raises(WorkspaceViolation):
        guard.resolve("~/secret.txt")


@pytest.mark.parametrize(
    "name",
    ["$HOME", "%2e%2e", "%2E%2E%2F", "\u2024\u2024", "\uff0e\uff0e", "..\\..\\etc", "a~b", "${X}"],
)
def test_variables_encodings_and_look_alike_dots_are_literal(
    guard: Workspace, workspace: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", "/")
    assert guard.resolve(f"{name}/x") == workspace / name / "x"


def test_probing_outside_reveals_nothing(guard: Workspace, outside: Path) -> None:
    (outside / "file").write_text("f")
    messages = set()
    for path in (outside / "file" / "x", outside / "missing" / "x", outside / "secret.txt"):
        with pytest.raises(WorkspaceViolation) as caught:
            guard.resolve(str(path))
        messages.add(caught.value.message.replace(str(path), "<path>"))
    assert len(messages) == 1


def test_the_root_is_resolved_once_and_must_be_a_directory(tmp_path: Path, workspace: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(workspace)
    assert Workspace(alias).root == workspace
    with pytest.raises(ValueError, match="cannot be used"):
        Workspace(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="not a directory"):
        Workspace(tmp_path / "file")


def test_relative_and_contains(guard: Workspace, workspace: Path) -> None:
    assert guard.relative(workspace) == "."
    assert guard.relative(workspace / "a" / "b") == "a/b"
    assert guard.contains(workspace / "a")
    assert not guard.contains(Path(os.path.dirname(workspace)))


def test_paths_off_the_way_to_the_root_are_refused_without_looking(tmp_path: Path) -> None:
    """No existence oracle: probing a sibling of the workspace answers the same whether
    it exists or not (found in review)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("hi")
    (tmp_path / "secretdir").mkdir()
    guard = Workspace(workspace)
    messages = []
    for probe in ("secretdir", "nosuchdir"):
        with pytest.raises(WorkspaceViolation) as caught:
            guard.resolve(f"{tmp_path}/{probe}/../ws/README.md")
        messages.append(str(caught.value).replace(probe, "X"))
    assert messages[0] == messages[1]
    assert guard.resolve(f"{workspace}/README.md") == workspace / "README.md"  # via ancestors


@pytest.mark.parametrize("path", ["README.md/", "README.md/.", "README.md/./"])
def test_a_trailing_slash_or_dot_after_a_file_is_an_error(tmp_path: Path, path: str) -> None:
    (tmp_path / "README.md").write_text("hi")
    with pytest.raises(ToolExecutionError, match="is a file, not a directory"):
        Workspace(tmp_path).resolve(path)


@pytest.fixture
def linked(tmp_path: Path, workspace: Path, outside: Path) -> tuple[Workspace, Path]:
    """A workspace configured through a symlink (like macOS /tmp -> /private/tmp)."""
    (tmp_path / "alias").symlink_to(tmp_path)
    configured = tmp_path / "alias" / "workspace"
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("x")
    return Workspace(configured), configured


def test_a_workspace_configured_through_a_symlink_accepts_both_spellings(
    linked: tuple[Workspace, Path], workspace: Path
) -> None:
    guard, configured = linked
    assert guard.root == workspace and guard.configured == configured
    for spelling in (configured, workspace):
        assert guard.resolve(str(spelling / "src" / "app.py")) == workspace / "src" / "app.py"
        assert guard.resolve(f"{spelling}/./src//app.py") == workspace / "src" / "app.py"
        assert guard.resolve(str(spelling)) == workspace
        assert guard.resolve(f"{spelling}/src/../new.txt") == workspace / "new.txt"
    assert guard.resolve("src/app.py") == workspace / "src" / "app.py"


@pytest.mark.parametrize(
    "tail", ["/../outside/secret.txt", "/src/../../outside/secret.txt", "/..", "-other/x"]
)
def test_escapes_through_either_spelling_of_the_root_stay_refused(
    linked: tuple[Workspace, Path], workspace: Path, tail: str
) -> None:
    guard, configured = linked
    for spelling in (str(configured), str(workspace)):
        with pytest.raises(WorkspaceViolation):
            guard.resolve(spelling + tail)


def test_an_absolute_link_target_spelled_under_the_configured_root_is_followed(
    linked: tuple[Workspace, Path], workspace: Path, outside: Path
) -> None:
    guard, configured = linked
    (workspace / "inner").symlink_to(configured / "src")
    assert guard.resolve("inner/app.py") == workspace / "src" / "app.py"
    (workspace / "out").symlink_to(configured / ".." / "outside")
    with pytest.raises(WorkspaceViolation):
        guard.resolve("out/secret.txt")
