"""Skills: SKILL.md knowledge a model loads on demand, in the open Agent Skills format.

A Tool acts, an MCP tool acts elsewhere, a skill teaches: it is never executed. A
`SkillSet` finds skill folders, `summary()` is the short block for the system prompt,
and `tools()` gives the model `load_skill` and `read_skill_file` to read more when a
task calls for it. Needs the ``skills`` extra (PyYAML) to read front matter.
"""

from toolbridge.skills.skill import (
    SKILL_FILE,
    Requirements,
    Skill,
    SkillFormatError,
    SkillProblem,
    read_skill,
)
from toolbridge.skills.skillset import (
    ENTRY_POINT_GROUP,
    WORKSPACE_SKILLS,
    SkillSet,
    UnavailableSkill,
    default_roots,
)
from toolbridge.skills.tools import LoadSkill, ReadSkillFile

__all__ = [
    "ENTRY_POINT_GROUP",
    "SKILL_FILE",
    "WORKSPACE_SKILLS",
    "LoadSkill",
    "ReadSkillFile",
    "Requirements",
    "Skill",
    "SkillFormatError",
    "SkillProblem",
    "SkillSet",
    "UnavailableSkill",
    "default_roots",
    "read_skill",
]
