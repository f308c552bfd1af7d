"""The four workloads every runner measures, as plain data (no third-party imports).

Every runner gets the same tool names, the same raw JSON argument texts and, for
peers that take a hand-written JSON Schema (nanobot, the floor), the same schemas.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ADD = "add"
# W1 again, with `add` written as a plain (sync) function: each peer's path for sync tools.
ADD_SYNC = "add_sync"
SCHEDULE = "schedule_meeting"
# A typo of SCHEDULE: an unknown name that a good registry can suggest a fix for.
UNKNOWN = "schedule_meting"
# Every registry also holds these single-string-parameter tools, so that name lookup and
# "did you mean" work over a realistic number of names (10 tools in all).
FILLER_NAMES = (
    "read_file",
    "write_file",
    "list_dir",
    "web_search",
    "web_fetch",
    "run_shell",
    "send_message",
    "get_weather",
)

_ATTENDEES = [
    {"name": "Ada Lovelace", "email": "ada@example.com"},
    {"name": "Grace Hopper", "email": "grace@example.com"},
    {"name": "Alan Turing", "email": "alan@example.com"},
    {"name": "Barbara Liskov", "email": "barbara@example.com"},
    {"name": "Edsger Dijkstra", "email": "edsger@example.com"},
]
_MEETING: dict[str, Any] = {
    "title": "Design review",
    "start": "2026-05-04T15:30:00Z",
    "priority": "high",
    "attendees": _ATTENDEES,
}
# W3: "start" missing and "priority" outside its enum.
_BROKEN_MEETING = {k: v for k, v in _MEETING.items() if k != "start"} | {"priority": "urgent"}


@dataclass(frozen=True, slots=True)
class Workload:
    """One workload: which tool name is called with which raw argument text."""

    key: str
    title: str
    tool_name: str
    arguments: str


WORKLOADS = (
    Workload("W1", "two ints sent as strings", ADD, '{"a": "1", "b": "2"}'),
    Workload("W2", "nested: 5 attendees, enum, date-time", SCHEDULE, json.dumps(_MEETING)),
    Workload("W3", "W2 with a missing + a wrong field", SCHEDULE, json.dumps(_BROKEN_MEETING)),
    Workload("W4", "unknown tool name", UNKNOWN, '{"a": 1, "b": 2}'),
)
# Timed by the peers that run sync functions as tools (every typed peer registers add_sync).
SYNC_WORKLOADS = (Workload("W1s", "W1 with a sync function", ADD_SYNC, '{"a": "1", "b": "2"}'),)
ALL_WORKLOADS = WORKLOADS + SYNC_WORKLOADS

# Hand-written schemas, equivalent to what the typed signatures in typed_tools.py give.
ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
SCHEDULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "start": {"type": "string", "format": "date-time"},
        "priority": {"type": "string", "enum": ["low", "normal", "high"]},
        "attendees": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
                "required": ["name", "email"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["title", "start", "priority", "attendees"],
    "additionalProperties": False,
}
FILLER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    "additionalProperties": False,
}
