"""The decisions both backends share (journal/claims.py, rows.py, migrations.py), read as
tables: each backend's own tests show them through a real database; these pin the rules
themselves, so a change to one answer is seen here with its neighbours."""

from __future__ import annotations

from dataclasses import replace

import pytest

from toolbridge.core.errors import ErrorKind
from toolbridge.journal import CallKey, CallState, Claim, ClaimAction, JournalEntry, JournalError
from toolbridge.journal.claims import (
    LetGo,
    claim_action,
    interrupted,
    proven,
    running_entry,
    unheard,
)
from toolbridge.journal.migrations import migrations_due
from toolbridge.journal.rows import JSONB, TEXT

KEY = CallKey("s", "c", "h")
OURS, OTHER, GONE = 1, 2, 3
ALIVE = {OTHER}.__contains__


def stored(state: CallState) -> JournalEntry:
    return replace(running_entry(KEY, "t", {}), state=state)


@pytest.mark.parametrize(
    ("state", "held", "owner", "action"),
    [
        (CallState.FINISHED, True, OURS, ClaimAction.REPLAY),  # finished beats everything
        (CallState.FINISHED, False, OTHER, ClaimAction.REPLAY),
        (CallState.RUNNING, True, OURS, ClaimAction.BUSY),  # this journal runs it
        (CallState.RUNNING, False, OTHER, ClaimAction.BUSY),  # another open one runs it
        (CallState.QUEUED, False, OTHER, ClaimAction.BUSY),
        (CallState.QUEUED, False, GONE, ClaimAction.RUN),  # never started: same attempt
        (CallState.QUEUED, False, None, ClaimAction.RUN),
        (CallState.RUNNING, False, GONE, ClaimAction.INTERRUPTED),  # started, owner died
        (CallState.RUNNING, False, None, ClaimAction.INTERRUPTED),  # let go (abandoned)
        (CallState.RUNNING, False, OURS, ClaimAction.INTERRUPTED),  # ours, but let go
    ],
)
def test_what_a_claim_of_a_stored_call_gets(
    state: CallState, held: bool, owner: int | None, action: ClaimAction
) -> None:
    entry = stored(state)
    assert claim_action(entry, owner, held={KEY} if held else set(), alive=ALIVE) is action


@pytest.mark.parametrize(
    ("state", "held", "owner", "seen"),
    [
        (CallState.RUNNING, False, GONE, CallState.INTERRUPTED),
        (CallState.RUNNING, False, None, CallState.INTERRUPTED),
        (CallState.RUNNING, True, OURS, CallState.RUNNING),
        (CallState.RUNNING, False, OTHER, CallState.RUNNING),
        (CallState.QUEUED, False, GONE, CallState.QUEUED),  # never started: not interrupted
        (CallState.FINISHED, False, None, CallState.FINISHED),
    ],
)
def test_what_a_reader_can_prove_of_a_stored_call(
    state: CallState, held: bool, owner: int | None, seen: CallState
) -> None:
    entry = stored(state)
    held_keys = {KEY} if held else set()
    assert proven(entry, owner, held=held_keys, alive=ALIVE).state is seen


def test_what_undoes_a_claim_nobody_heard() -> None:
    entry = running_entry(KEY, "t", {})
    assert unheard(Claim(ClaimAction.RUN, entry), inserted=True) is LetGo.DELETE
    assert unheard(Claim(ClaimAction.RUN, entry), inserted=False) is LetGo.REQUEUE
    assert unheard(Claim(ClaimAction.INTERRUPTED, entry), inserted=False) is LetGo.DISOWN
    assert unheard(Claim(ClaimAction.REPLAY, entry), inserted=False) is None
    assert unheard(Claim(ClaimAction.BUSY, entry), inserted=True) is None


def test_only_a_call_finished_as_interrupted_is_one_a_retry_reopens() -> None:
    finished = replace(running_entry(KEY, "t", {}), state=CallState.FINISHED)
    assert interrupted(replace(finished, error_kind=ErrorKind.INTERRUPTED))
    assert not interrupted(replace(finished, error_kind="execution"))
    assert not interrupted(replace(finished, state=CallState.RUNNING, error_kind=None))
    assert not interrupted(None)


def test_which_migrations_are_due() -> None:
    scripts = ("a", "b", "c", "")
    opened = {"where": "here", "instead": "another journal file"}
    assert migrations_due(0, scripts, create=True, **opened) == range(1, 5)
    assert migrations_due(3, scripts, create=True, **opened) == range(4, 5)  # "" still due
    assert not migrations_due(4, scripts, create=True, **opened)
    assert not migrations_due(3, scripts, create=False, **opened)  # read as it is
    with pytest.raises(JournalError, match="does not migrate it"):
        migrations_due(2, scripts, create=False, **opened)
    with pytest.raises(JournalError, match=r"schema version 5; this one reads up to 4\)"):
        migrations_due(5, scripts, create=True, **opened)


def test_both_backends_store_a_value_alike_but_for_nul() -> None:
    value = {"n": float("nan"), "s": "a\udcffb", "k": [1, "x"]}
    assert TEXT.dumps(value) == JSONB.dumps(value) == ('{"n":"NaN","s":"a\ufffdb","k":[1,"x"]}')
    assert TEXT.dumps({"s": "a\x00b"}) == '{"s":"a\\u0000b"}'
    assert JSONB.dumps({"s": "a\x00b"}) == '{"s":"a\\ufffdb"}'
    assert JSONB.dumps({"s": "a\\u0000b"}) == TEXT.dumps({"s": "a\\u0000b"})  # letters, not NUL
    with pytest.raises(JournalError, match="holds NUL"):
        JSONB.new_call(CallKey("s", "c\x00", "h"), "t", {}, None, queued=False)
    call = TEXT.new_call(CallKey("s", "c\x00", "h"), "t", {"a": 1}, {}, queued=True)
    assert (call.arguments_text, call.approval_text, call.queued) == ('{"a":1}', None, True)
