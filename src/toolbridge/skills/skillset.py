"""`SkillSet`: the skills found in an ordered list of roots and in installed distributions.

A root is a folder of skill folders, or one skill folder itself. Roots are read in
order and the first skill of a name wins, with a warning for the later one, as the
tool loader does for tools. Invalid skills and skills whose requirements this machine
does not meet are kept aside with the reason, never offered to the model.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from toolbridge.core.naming import NameIndex
from toolbridge.core.tool import Tool
from toolbridge.security.control import CONTROL_DIR
from toolbridge.skills.skill import SKILL_FILE, Skill, SkillFormatError, SkillProblem, read_skill

__all__ = [
    "ENTRY_POINT_GROUP",
    "WORKSPACE_SKILLS",
    "SkillSet",
    "UnavailableSkill",
    "default_roots",
]

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "toolbridge.skills"
WORKSPACE_SKILLS = Path(CONTROL_DIR) / "skills"
USER_SKILLS = Path("~") / ".toolbridge" / "skills"


@dataclass(frozen=True, slots=True)
class UnavailableSkill:
    """A valid skill this machine cannot use, and why (missing binaries, variables)."""

    skill: Skill
    reasons: tuple[str, ...]


def default_roots(workspace: str | os.PathLike[str] | None = None) -> list[Path]:
    """The usual roots, in order: the workspace's ``.toolbridge/skills``, then the user's."""
    roots = [Path(workspace) / WORKSPACE_SKILLS] if workspace is not None else []
    roots.append(USER_SKILLS.expanduser())
    return roots


class SkillSet:
    """The skills of some roots, read once: available ones, unavailable ones, invalid ones.

    Build it again to see edits; `summary_hash` changes when the summary would. Roots
    inside `workspace`'s ``.toolbridge`` folder are read without following any link.
    """

    def __init__(
        self,
        roots: Iterable[str | os.PathLike[str]] = (),
        *,
        entry_points: bool = True,
        group: str = ENTRY_POINT_GROUP,
        environ: Mapping[str, str] | None = None,
        which: Callable[[str], str | None] = shutil.which,
        workspace: str | os.PathLike[str] | None = None,
    ) -> None:
        self.problems: list[SkillProblem] = []
        found: dict[str, Skill] = {}
        sources = [(str(root), Path(root)) for root in roots]
        if entry_points:
            sources.extend(self._entry_point_roots(group))
        # Roots in the workspace's own folder are read as they lie there: no link in
        # them is followed (one could lead to files the model can write).
        control = Path(os.path.abspath(Path(workspace) / CONTROL_DIR)) if workspace else None
        for source, root in sources:
            contained = control is not None and Path(os.path.abspath(root)).is_relative_to(control)
            for skill in self._read_root(source, root, contained=contained):
                first = found.get(skill.name)
                if first is not None:
                    logger.warning(
                        "skill %r in %s is ignored: the one in %s came first",
                        skill.name,
                        skill.folder,
                        first.folder,
                    )
                    continue
                found[skill.name] = skill
        env = os.environ if environ is None else environ
        self._available: dict[str, Skill] = {}
        self.unavailable: list[UnavailableSkill] = []
        for name in sorted(found):
            skill = found[name]
            reasons = skill.requires.unmet(env, which)
            if reasons:
                self.unavailable.append(UnavailableSkill(skill, tuple(reasons)))
            else:
                self._available[name] = skill

    @classmethod
    def discover(
        cls,
        workspace: str | os.PathLike[str] | None = None,
        *,
        paths: Sequence[str | os.PathLike[str]] = (),
        user: bool = True,
        entry_points: bool = True,
    ) -> SkillSet:
        """Skills of the workspace, then the user's folder, then `paths`, then plugins."""
        roots = default_roots(workspace) if user else default_roots(workspace)[:-1]
        return cls([*roots, *paths], entry_points=entry_points, workspace=workspace)

    # --- reading -----------------------------------------------------------------------

    def _read_root(self, source: str, root: Path, *, contained: bool = False) -> Iterator[Skill]:
        if contained and _linked(root):
            self.problems.append(SkillProblem(root, "(root)", _LINK_RULE))
            return
        if not root.is_dir():
            if root.exists():
                self.problems.append(SkillProblem(root, "(root)", "is not a directory"))
            return
        folders = [root] if (root / SKILL_FILE).is_file() else _skill_folders(root)
        if contained:
            for folder in [f for f in folders if f.is_symlink()]:
                self.problems.append(SkillProblem(folder, "(folder)", _LINK_RULE))
                folders.remove(folder)
        for folder in folders:
            try:
                yield read_skill(folder)
            except SkillFormatError as exc:
                self.problems.extend(exc.problems)
                logger.warning("skill in %s (from %s) is invalid:\n%s", folder, source, exc)

    def _entry_point_roots(self, group: str) -> list[tuple[str, Path]]:
        from importlib import metadata

        roots: list[tuple[str, Path]] = []
        for entry_point in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
            source = f"entry point {entry_point.name!r} ({entry_point.value})"
            try:
                roots.extend((source, path) for path in _paths_of(entry_point.load()))
            except Exception as exc:
                self.problems.append(SkillProblem(Path(source), "(entry point)", repr(exc)))
                logger.error("skipping skills of %s: %r", source, exc, exc_info=exc)
        return roots

    # --- asking ------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Skill]:
        return iter(self._available.values())

    def __len__(self) -> int:
        return len(self._available)

    def __contains__(self, name: object) -> bool:
        return name in self._available

    def get(self, name: str) -> Skill | None:
        """The available skill called `name`, if any."""
        return self._available.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._available)

    def unavailable_reason(self, name: str) -> str | None:
        """Why the valid skill `name` is not offered here, or None."""
        for entry in self.unavailable:
            if entry.skill.name == name:
                return "; ".join(entry.reasons)
        return None

    def suggest(self, name: str) -> list[str]:
        """Available names the model probably meant by `name`."""
        return self._index.suggest(name)

    @cached_property
    def _index(self) -> NameIndex:
        return NameIndex(self.names)

    def summary(self) -> str:
        """The block a system prompt carries: one line per available skill, sorted by name.

        Empty when no skill is available. Computed once; the same text on every call.
        """
        return self._summary

    @cached_property
    def _summary(self) -> str:
        if not self._available:
            return ""
        lines = [
            "Skills: guidance you can load when a task needs it. Call load_skill with a "
            "name to read one; read_skill_file reads the files it mentions.",
            *(
                f"- {skill.name}: {' '.join(skill.description.split())}"
                for skill in self._available.values()
            ),
        ]
        return "\n".join(lines)

    @cached_property
    def summary_hash(self) -> str:
        """sha256 of the summary: equal across runs until a skill's name or description changes."""
        return hashlib.sha256(self.summary().encode("utf-8")).hexdigest()

    def tools(self) -> list[Tool]:
        """The two read-only tools that give the model this set: load_skill, read_skill_file."""
        from toolbridge.skills.tools import LoadSkill, ReadSkillFile

        return [LoadSkill(self), ReadSkillFile(self)]


_LINK_RULE = (
    "is a symbolic link; skills in the workspace's .toolbridge folder are read only as "
    "they lie there, never through a link (copy the skill folder in instead)"
)


def _linked(root: Path) -> bool:
    """Whether `root`, or a folder between it and the control folder, is a symlink."""
    for path in (root, *root.parents):
        if path.is_symlink():
            return True
        if path.name == CONTROL_DIR:
            return False
    return False


def _skill_folders(root: Path) -> list[Path]:
    try:
        entries = sorted(os.scandir(root), key=lambda entry: entry.name)
    except OSError as exc:
        logger.warning("cannot list skills root %s: %s", root, exc.strerror)
        return []
    return [
        Path(entry.path)
        for entry in entries
        if not entry.name.startswith(".")
        and entry.is_dir()
        and (Path(entry.path) / SKILL_FILE).exists()
    ]


def _paths_of(loaded: Any) -> list[Path]:
    """What an entry point may name: a package (its folder), a path, or a callable giving paths."""
    if callable(loaded) and not isinstance(loaded, type):
        loaded = loaded()
    if isinstance(loaded, str | os.PathLike):
        return [Path(loaded)]
    if isinstance(loaded, list | tuple) and all(isinstance(p, str | os.PathLike) for p in loaded):
        return [Path(p) for p in loaded]
    paths = getattr(loaded, "__path__", None)
    if paths is not None:
        return [Path(p) for p in paths]
    file = getattr(loaded, "__file__", None)
    if isinstance(file, str):
        return [Path(file).parent]
    raise TypeError(
        f"{loaded!r} is not a package, a path or a callable returning paths of skill folders"
    )
