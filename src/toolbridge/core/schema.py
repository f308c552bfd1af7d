"""Parameter schemas: check them, and compile them into a caster + validator.

`CompiledSchema` is built once per tool, at registration. The result casts a model's
arguments conservatively ("60" -> 60 where an integer is wanted, JSON text -> object
where an object is wanted; `toolbridge.core.casting`, assembled by
`toolbridge.core.schema_compiler`) and validates them with a compiled jsonschema-rs
validator (draft 2020-12 unless ``$schema`` says otherwise), collecting every error
with its JSON path (`toolbridge.core.schema_issues` words them).

Casting never loses information and never touches a value that already has the
type its schema node wants; union branches are taken only if the cast value then
validates against that branch.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from typing import Any, NamedTuple

import jsonschema_rs

from toolbridge.core.calls import Repair, format_path
from toolbridge.core.casting import CastState
from toolbridge.core.errors import ArgumentIssue, ToolDefinitionError
from toolbridge.core.frozen import freeze, thaw
from toolbridge.core.jsondata import MAX_DEPTH, json_data_issues, leaves_look_plain
from toolbridge.core.schema_compiler import Compiler, SubschemaValidators
from toolbridge.core.schema_issues import (
    MAX_ISSUES,
    UNKNOWN_KEY_OBJECTS,
    capped,
    castable,
    render_errors,
    shorten,
)
from toolbridge.core.schema_keywords import typed_depth
from toolbridge.core.sendable import sendable

__all__ = [
    "EMPTY_OBJECT_SCHEMA",
    "Checked",
    "CompiledSchema",
    "check_parameters_schema",
]


EMPTY_OBJECT_SCHEMA: Mapping[str, Any] = freeze({"type": "object", "properties": {}})


# --- checking -----------------------------------------------------------------------


def check_parameters_schema(schema: object, *, owner: str) -> None:
    """Refuse anything that is not a valid JSON Schema of type object, saying why."""
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(
            f"{owner}: parameters must be a JSON Schema object (a dict), "
            f"got {type(schema).__name__}"
        )
    if schema.get("type") != "object":
        raise ToolDefinitionError(
            f'{owner}: parameters must be a JSON Schema with "type": "object" at the top, '
            f"got type {schema.get('type')!r}"
        )
    try:  # as it is sent and checked: a lone surrogate written as text (jsonschema-rs,
        # like UTF-8, cannot take one: a bare ValueError, not a definition error)
        jsonschema_rs.meta.validate(thaw(sendable(schema)), registry=_no_fetching())
    except jsonschema_rs.ValidationError as exc:
        path = format_path(exc.instance_path)
        raise ToolDefinitionError(
            f"{owner}: parameters is not a valid JSON Schema: {exc.message} (at {path})"
        ) from None
    except jsonschema_rs.ReferencingError as exc:
        raise ToolDefinitionError(f"{owner}: parameters has an unknown $schema: {exc}") from None


def _refuse_fetch(uri: str) -> Any:
    raise ValueError(
        f"{uri} is not fetched: toolbridge never downloads schemas (put the definition "
        "under $defs and refer to it with #/$defs/...)"
    )


@functools.cache
def _no_fetching() -> Any:
    """A registry that knows the standard meta-schemas and downloads nothing: a schema's
    $schema or $ref must never make registration reach the network (SSRF, hangs)."""
    return jsonschema_rs.Registry([], retriever=_refuse_fetch)


# --- the compiled schema ---------------------------------------------------------------


class Checked(NamedTuple):
    """The outcome of `CompiledSchema.check`: the value to run with (the input itself when
    nothing was repaired), every repair made, and every problem (empty when valid)."""

    value: Any
    repairs: tuple[Repair, ...]
    issues: tuple[ArgumentIssue, ...]


# Checked(...) runs NamedTuple's Python-level __new__; the hot path builds it directly.
_new_tuple = tuple.__new__


class CompiledSchema:
    """A parameters schema compiled once; `check` is the one question the registry asks.

    `settled` says that a value the validator accepts needs no cast pass at all, which
    `check` uses to skip it on the hot path.
    """

    __slots__ = ("_caster", "_typed", "_validator", "schema", "settled")

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        plain = thaw(schema)  # jsonschema-rs takes exact dicts and lists, not subclasses
        # offline: a remote $ref is an error at registration, never a download
        options: dict[str, Any] = {"validate_formats": True, "offline": True}
        validators = SubschemaValidators(options)
        compiler = Compiler(plain, validators)
        self._caster = compiler.node(plain, "", strict_keys=True)
        checked, self.settled = compiler.validation_schema()
        validators.schema = checked
        # Whether a valid value's plain-data check may be the validator's own pass plus
        # `leaves_look_plain` instead of the Python walk (see `check`).
        depth = typed_depth(checked, checked, frozenset())
        self._typed = depth is not None and depth <= MAX_DEPTH
        try:
            self._validator = jsonschema_rs.validator_for(checked, **options)
        except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
            message = getattr(exc, "message", None) or str(exc).splitlines()[0]
            raise ToolDefinitionError(f"parameters schema cannot be compiled: {message}") from None

    def check(self, value: Any, *, plain: bool = False) -> Checked:
        """Cast `value` by the schema and validate it: the value, the repairs, the issues.

        First, unless `plain` vouches for it (text from `decode_arguments` that
        `jsondata.text_may_hide_problems` cleared), `value` must be plain JSON data
        (`jsondata.json_data_issues`). A valid value the cast pass cannot change comes
        back as the same object. Never raises for any input.
        """
        validator = self._validator
        valid: bool | None = None  # the validator's verdict on `value`, once asked
        if not plain:
            if self._typed and leaves_look_plain(value):
                # A fully typed schema makes the validator look at every value and key
                # (a set, bytes or an int key is a ValueError or invalid there), and
                # `leaves_look_plain` saw the rest: a valid value is plain data.
                try:
                    valid = plain = bool(validator.is_valid(value))
                except ValueError:
                    valid = None
                if plain and self.settled:
                    return _new_tuple(Checked, (value, (), ()))
            if not plain and (found := json_data_issues(value)):
                return Checked(value, (), capped(found))
        try:
            if self.settled:
                if valid is None:
                    valid = bool(validator.is_valid(value))
                if valid:  # valid as sent: no cast pass, no copy
                    return _new_tuple(Checked, (value, (), ()))
                errors = list(itertools.islice(validator.iter_errors(value), MAX_ISSUES + 1))
                if not any(castable(error) for error in errors):
                    # no cast could change the verdict (a missing key, a bad format...)
                    return Checked(value, (), capped(list(render_errors(errors, set()))))
            state = CastState()
            new = value if self._caster is None else self._caster(value, (), state)
            repairs = tuple(state.repairs)
            if not state.unknown_paths and validator.is_valid(new):
                return _new_tuple(Checked, (new, repairs, ()))
            return Checked(new, repairs, self._issues(new, state))
        except (RecursionError, ValueError) as exc:
            # Defence in depth: plain JSON within MAX_DEPTH never gets here, but a limit
            # of the validator's own must still be an error for the model, not a crash.
            issue = ArgumentIssue("$", f"the arguments cannot be validated: {shorten(str(exc))}")
            return Checked(value, (), (issue,))

    def _issues(self, value: Any, state: CastState) -> tuple[ArgumentIssue, ...]:
        """Unknown keys found by the cast pass, then the validator's errors, capped."""
        issues = list(state.issues)
        if len(state.unknown_paths) > UNKNOWN_KEY_OBJECTS:
            more = len(state.unknown_paths) - UNKNOWN_KEY_OBJECTS
            issues.append(ArgumentIssue("$", f"unknown keys in {more:,} more objects"))
        errors = itertools.islice(self._validator.iter_errors(value), MAX_ISSUES + 1)
        issues.extend(render_errors(errors, set(state.unknown_paths)))
        return capped(issues)
