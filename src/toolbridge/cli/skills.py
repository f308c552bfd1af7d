"""``toolbridge skills``: list the skills a model would be offered, show one, check folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from toolbridge.cli.app import (
    CliError,
    ExitCode,
    VerboseOption,
    WorkspaceOption,
    app,
    configure_logging,
    err,
    out,
    reporting,
)
from toolbridge.cli.display import echo, echo_json, plain, show, table
from toolbridge.skills import SkillSet

skills_app = typer.Typer(
    name="skills",
    help="SKILL.md folders: what is available, one skill's text, format checks.",
    no_args_is_help=True,
)
app.add_typer(skills_app)

PathsOption = Annotated[
    list[Path] | None,
    typer.Option("--path", "-p", help="More skill roots, after the workspace's and the user's."),
]


def _skill_set(workspace: Path | None, paths: list[Path] | None) -> SkillSet:
    return SkillSet.discover(workspace or Path.cwd(), paths=paths or [])


@skills_app.command("list")
def list_command(
    workspace: WorkspaceOption = None,
    paths: PathsOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    verbose: VerboseOption = False,
) -> None:
    """List the skills: available ones, then unavailable ones with the reason."""
    configure_logging(verbose)
    with reporting(verbose):
        _list(workspace, paths, as_json=as_json)


def _list(workspace: Path | None, paths: list[Path] | None, *, as_json: bool) -> None:
    skills = _skill_set(workspace, paths)
    rows = [(skill.name, "available", skill.description, str(skill.folder)) for skill in skills]
    rows += [
        (entry.skill.name, "unavailable: " + "; ".join(entry.reasons), entry.skill.description,
         str(entry.skill.folder))
        for entry in skills.unavailable
    ]  # fmt: skip
    if as_json:
        keys = ("name", "status", "description", "folder")
        echo_json([dict(zip(keys, row, strict=True)) for row in rows], indent=2)
    else:
        grid = table("name", "status", "description", title=f"{len(skills)} skills available")
        for name, status, description, _ in rows:
            grid.add_row(plain(name), plain(status), plain(" ".join(description.split())))
        out.print(grid)
    for problem in skills.problems:
        show(err, f"invalid: {problem}")


@skills_app.command("show")
def show_command(
    name: Annotated[str, typer.Argument(help="The skill's name.")],
    workspace: WorkspaceOption = None,
    paths: PathsOption = None,
    verbose: VerboseOption = False,
) -> None:
    """Print a skill's instructions, as load_skill gives them to the model."""
    configure_logging(verbose)
    with reporting(verbose):
        skills = _skill_set(workspace, paths)
        skill = skills.get(name)
        if skill is None:
            reason = skills.unavailable_reason(name)
            suggestions = skills.suggest(name)
            hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
            message = f"skill {name!r} is unavailable: {reason}" if reason else f"no skill {name!r}"
            raise CliError(message + hint, ExitCode.USAGE)
        echo(skill.body)


@skills_app.command("validate")
def validate_command(
    paths: Annotated[
        list[Path], typer.Argument(help="Skill folders, or folders of skill folders.")
    ],
) -> None:
    """Check skill folders against the format; exit 1 with every problem listed."""
    with reporting(verbose=False):
        skills = SkillSet(paths, entry_points=False)
    found = len(skills) + len(skills.unavailable)
    for path in paths:
        if not path.exists():
            show(err, f"{path}: no such file or directory")
    for problem in skills.problems:
        show(err, str(problem))
    if skills.problems or not all(path.exists() for path in paths):
        raise typer.Exit(ExitCode.CALL_FAILED)
    out.print(f"{found} skill(s) valid", markup=False, highlight=False)
