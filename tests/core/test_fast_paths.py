"""The fast paths of `prepare_call` answer exactly as the general ones do."""

from __future__ import annotations

from toolbridge import ToolRegistry, tool


@tool
def schedule_meeting(title: str) -> str:
    """Schedule."""
    return title


@tool
def schedule_meetings(title: str) -> str:
    """Schedule many."""
    return title


def test_a_remembered_unknown_tool_error_is_the_one_a_fresh_registry_writes() -> None:
    registry = ToolRegistry([schedule_meeting])
    first = registry.prepare_call("schedule_meting", {}).error
    again = registry.prepare_call("schedule_meting", {}).error
    fresh = ToolRegistry([schedule_meeting]).prepare_call("schedule_meting", {}).error
    assert first is not None and again is not None and fresh is not None
    assert again.render() == first.render() == fresh.render()
    assert "Did you mean 'schedule_meeting'?" in again.render()


def test_remembered_unknown_tool_errors_follow_every_change_of_tools() -> None:
    registry = ToolRegistry([schedule_meeting])
    assert registry.prepare_call("schedule_meetings", {}).error is not None
    registry.register(schedule_meetings)
    assert registry.prepare_call("schedule_meetings", {"title": "t"}).error is None
    error = registry.prepare_call("schedule_meetingz", {}).error
    assert error is not None and "'schedule_meetings'" in error.render()
    registry.unregister("schedule_meetings")
    error = registry.prepare_call("schedule_meetings", {}).error
    assert error is not None and "Did you mean 'schedule_meeting'?" in error.render()


def test_many_unknown_names_stay_bounded_and_correct() -> None:
    registry = ToolRegistry([schedule_meeting])
    for index in range(500):
        error = registry.prepare_call(f"other_{index}", {}).error
        assert error is not None and f"'other_{index}'" in error.render()
    assert len(registry._unknown_errors) <= 64
    long_name = "x" * 1_000
    error = registry.prepare_call(long_name, {}).error
    assert error is not None and long_name not in registry._unknown_errors
