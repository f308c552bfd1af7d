"""One skill: a folder with a ``SKILL.md`` (YAML front matter + Markdown body), read and checked.

The format is the open Agent Skills one, so folders written for Claude, Codex or nanobot
work unchanged: ``name`` and ``description`` are required, ``license``, ``compatibility``,
``allowed-tools`` and ``metadata`` optional, unknown keys kept and ignored. Every rule
that fails is reported with the file, the field and the rule, all at once.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from toolbridge.core.errors import PolicyViolation, ToolbridgeError, ToolExecutionError
from toolbridge.core.jsondata import nesting
from toolbridge.security.workspace import Workspace

__all__ = [
    "SKILL_FILE",
    "Requirements",
    "Skill",
    "SkillFormatError",
    "SkillProblem",
    "read_skill",
]

SKILL_FILE = "SKILL.md"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_SKILL_FILE_BYTES = 1_000_000  # a SKILL.md is prose for a prompt, not a data file
MAX_FRONT_MATTER_DEPTH = 64  # levels of nested mappings and lists; real ones use two or three
MAX_FRONT_MATTER_NODES = 100_000  # values, counting each alias (*name) as what it repeats


@dataclass(frozen=True, slots=True)
class SkillProblem:
    """One rule a skill folder breaks: which file, which field, which rule."""

    file: Path
    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field}: {self.rule}"


class SkillFormatError(ToolbridgeError, ValueError):
    """A skill folder that does not follow the format; `problems` lists every broken rule."""

    def __init__(self, problems: list[SkillProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(problem) for problem in problems))


@dataclass(frozen=True, slots=True)
class Requirements:
    """What a skill needs from the machine: binaries on PATH, environment variables.

    Read from ``metadata`` in the shapes existing skills use: a ``requires`` mapping
    directly under ``metadata`` or under a vendor key (``{"nanobot": {"requires": ...}}``,
    ``{"openclaw": {"requires": ...}}``), with ``bins``, ``anyBins`` and ``env`` lists.
    """

    bins: tuple[str, ...] = ()
    any_bins: tuple[str, ...] = ()
    env: tuple[str, ...] = ()

    def unmet(
        self,
        environ: Mapping[str, str] = os.environ,
        which: Callable[[str], str | None] = shutil.which,
    ) -> list[str]:
        """Why this machine cannot use the skill, one reason per missing thing; empty if it can."""
        reasons = [f"binary {name!r} is not on PATH" for name in self.bins if which(name) is None]
        if self.any_bins and all(which(name) is None for name in self.any_bins):
            reasons.append(f"none of the binaries {', '.join(self.any_bins)} is on PATH")
        reasons.extend(
            f"environment variable {name} is not set"
            for name in self.env
            if not _is_set(environ, name)
        )
        return reasons


def _is_set(environ: Mapping[str, str], name: str) -> bool:
    """Whether the variable `name` has a value; False for a name no environment can hold
    (a lone surrogate, from a front matter's ``"\\udb40"``, has no bytes: `os.environ`
    raises on it)."""
    try:
        return bool(environ.get(name))
    except ValueError:  # UnicodeEncodeError, or a NUL in the name
        return False


@dataclass(frozen=True, slots=True)
class Skill:
    """A valid skill: its front matter, its body, and the folder its resources live in."""

    name: str
    description: str
    folder: Path
    body: str
    license: str | None = None
    compatibility: str | None = None
    allowed_tools: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    requires: Requirements = Requirements()

    @property
    def file(self) -> Path:
        return self.folder / SKILL_FILE


def read_skill(folder: str | os.PathLike[str]) -> Skill:
    """Read and check the skill in `folder`; a `SkillFormatError` lists every problem."""
    folder = Path(folder)
    file = folder / SKILL_FILE
    problems: list[SkillProblem] = []

    def problem(field_name: str, rule: str) -> None:
        problems.append(SkillProblem(file, field_name, rule))

    text = _read_text(file, problem)
    if text is None:
        raise SkillFormatError(problems)
    front, body = _split_front_matter(text, problem)
    if front is None:
        raise SkillFormatError(problems)

    name = _string(front, "name", problem, required=True)
    if name is not None:
        _check_name(name, folder.name, problem)
    description = _string(front, "description", problem, required=True)
    if description is not None and not description.strip():
        problem("description", "must not be empty")
    elif description is not None and len(description) > MAX_DESCRIPTION:
        problem("description", f"must be at most {MAX_DESCRIPTION} characters ({len(description)})")
    license_ = _string(front, "license", problem)
    compatibility = _string(front, "compatibility", problem)
    if compatibility is not None and not 1 <= len(compatibility) <= MAX_COMPATIBILITY:
        problem("compatibility", f"must be 1 to {MAX_COMPATIBILITY} characters when given")
    allowed = _allowed_tools(front.get("allowed-tools"), problem)
    metadata = _metadata(front.get("metadata"), problem)
    requires = _requirements(metadata, problem)
    if problems:
        raise SkillFormatError(problems)
    assert name is not None and description is not None
    return Skill(
        name=name,
        description=description.strip(),
        folder=folder,
        body=body,
        license=license_,
        compatibility=compatibility,
        allowed_tools=allowed,
        metadata=MappingProxyType(metadata),
        requires=requires,
    )


Report = Callable[[str, str], None]


def _read_text(file: Path, problem: Report) -> str | None:
    """The file's text, read through the workspace guard of its folder: a SKILL.md that is
    a link to a file elsewhere (a key, a password file) is refused, never read."""
    if not file.exists() and not file.is_symlink():
        problem("(file)", f"a skill folder must contain {SKILL_FILE}")
        return None
    try:
        guard = Workspace(file.parent)
        with guard.open_read(guard.resolve(SKILL_FILE)) as handle:
            data = handle.read(MAX_SKILL_FILE_BYTES + 1)
    except (PolicyViolation, ToolExecutionError, ValueError) as exc:
        problem("(file)", f"cannot be read: {exc}")
        return None
    except OSError as exc:
        problem("(file)", f"cannot be read: {exc.strerror or exc}")
        return None
    if len(data) > MAX_SKILL_FILE_BYTES:
        problem("(file)", f"must be at most {MAX_SKILL_FILE_BYTES:,} bytes")
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problem("(file)", f"must be UTF-8 text (invalid byte at offset {exc.start})")
        return None


def _split_front_matter(text: str, problem: Report) -> tuple[dict[str, Any] | None, str]:
    """The parsed front matter (a mapping) and the body after it."""
    import yaml  # the skills extra; imported here so the package imports without it

    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        problem("(front matter)", "the file must start with a '---' line opening front matter")
        return None, text
    index = next((i for i, line in enumerate(lines) if i and line.strip() == "---"), None)
    if index is None:
        problem("(front matter)", "no closing '---' line after the front matter")
        return None, text
    source = "".join(lines[1:index])
    body = "".join(lines[index + 1 :]).lstrip("\n")
    try:
        front = _load_yaml(source)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 2})" if where is not None else ""
        problem("(front matter)", f"is not valid YAML{at}: {getattr(exc, 'problem', exc)}")
        return None, body
    except (ValueError, OverflowError) as exc:  # a date like 2024-13-45, a 5,000-digit number
        problem("(front matter)", f"has a value YAML cannot read: {exc}")
        return None, body
    except RecursionError:  # defence in depth: the loader stops far earlier
        problem("(front matter)", f"must nest at most {MAX_FRONT_MATTER_DEPTH} levels")
        return None, body
    if not isinstance(front, dict):
        problem("(front matter)", "must be a YAML mapping of fields (name: ..., description: ...)")
        return None, body
    return front, body


def _load_yaml(source: str) -> Any:
    """`yaml.safe_load` with limits: nesting deeper than `MAX_FRONT_MATTER_DEPTH` levels,
    more than `MAX_FRONT_MATTER_NODES` values (aliases counted as what they repeat, so
    "billion laughs" is refused) and an alias inside its own anchor are `YAMLError`s,
    before PyYAML's recursive composer could exhaust the stack."""
    import yaml
    from yaml.composer import ComposerError

    class Loader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.depth = 0
            self.nodes = 0
            self.sizes: dict[int, int] = {}  # id(node) -> values it expands to

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()  # type: ignore[no-untyped-call]
                node = self.anchors.get(event.anchor)
                if node is not None and id(node) not in self.sizes:
                    raise ComposerError(
                        None, None, f"alias *{event.anchor} is inside its own anchor",
                        event.start_mark,
                    )  # fmt: skip
                self._count(self.sizes.get(id(node), 1), event)
                return super().compose_node(parent, index)
            event = self.peek_event()  # type: ignore[no-untyped-call]
            self.depth += 1
            if self.depth > MAX_FRONT_MATTER_DEPTH:
                raise ComposerError(
                    None, None, f"nested more than {MAX_FRONT_MATTER_DEPTH} levels deep",
                    event.start_mark,
                )  # fmt: skip
            start = self.nodes
            self._count(1, event)
            try:
                node = super().compose_node(parent, index)
            finally:
                self.depth -= 1
            self.sizes[id(node)] = self.nodes - start
            return node

        def _count(self, size: int, event: Any) -> None:
            self.nodes += size
            if self.nodes > MAX_FRONT_MATTER_NODES:
                raise ComposerError(
                    None, None, f"more than {MAX_FRONT_MATTER_NODES:,} values "
                    "(aliases counted as what they repeat)", event.start_mark,
                )  # fmt: skip

    loader = Loader(source)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _string(front: Mapping[str, Any], key: str, problem: Report, *, required: bool = False) -> Any:
    if key not in front or front[key] is None:
        if required:
            problem(key, "is required")
        return None
    value = front[key]
    if not isinstance(value, str):
        problem(key, f"must be a string, not {type(value).__name__}")
        return None
    return value


def _check_name(name: str, folder_name: str, problem: Report) -> None:
    if not 1 <= len(name) <= MAX_NAME:
        problem("name", f"must be 1 to {MAX_NAME} characters ({len(name)})")
    if not all(ch == "-" or (ch.isalnum() and not ch.isupper()) for ch in name):
        problem("name", "may contain only lowercase letters, digits and hyphens")
    elif name.startswith("-") or name.endswith("-") or "--" in name:
        problem("name", "must not start or end with a hyphen or contain '--'")
    if name != folder_name:
        problem("name", f"must equal the folder name {folder_name!r}")


def _allowed_tools(value: Any, problem: Report) -> tuple[str, ...]:
    """Space-delimited as the format says; a YAML list, as some tools write it, is accepted."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    problem("allowed-tools", "must be a space-delimited string of tool names")
    return ()


def _metadata(value: Any, problem: Report) -> dict[str, Any]:
    """A mapping; a JSON object written as a string (as nanobot's skills do) is read too."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except RecursionError:  # the decoder recurses once per level
            problem("metadata", f"must nest at most {MAX_FRONT_MATTER_DEPTH} levels")
            return {}
        except ValueError:
            problem("metadata", "must be a mapping (or a JSON object in a string)")
            return {}
        if nesting(value) > MAX_FRONT_MATTER_DEPTH:
            problem("metadata", f"must nest at most {MAX_FRONT_MATTER_DEPTH} levels")
            return {}
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        problem("metadata", "must be a mapping with string keys")
        return {}
    return value


def _requirements(metadata: Mapping[str, Any], problem: Report) -> Requirements:
    found: dict[str, list[str]] = {"bins": [], "anyBins": [], "env": []}
    places = [("metadata", metadata)] + [
        (f"metadata.{key}", value) for key, value in metadata.items() if isinstance(value, dict)
    ]
    for where, place in places:
        requires = place.get("requires")
        if requires is None:
            continue
        if not isinstance(requires, dict):
            problem(f"{where}.requires", "must be a mapping with bins, anyBins or env lists")
            continue
        for key, names in found.items():
            listed = requires.get(key, [])
            if not isinstance(listed, list) or not all(isinstance(n, str) and n for n in listed):
                problem(f"{where}.requires.{key}", "must be a list of non-empty strings")
                continue
            names.extend(name for name in listed if name not in names)
    return Requirements(tuple(found["bins"]), tuple(found["anyBins"]), tuple(found["env"]))
