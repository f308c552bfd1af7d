"""`Approvals` keeps who gave each grant (`by`) until the executor asks, for the journal."""

from __future__ import annotations

import pytest

from toolbridge.execution.approval import BY_DECISION, ApprovalRequest, Approvals, arguments_digest


def request(path: str) -> ApprovalRequest:
    args = {"path": path}
    return ApprovalRequest("c1", "rm", args, arguments_digest("rm", args))


def test_a_used_grant_says_who_gave_it_once() -> None:
    approvals = Approvals()
    a, b = request("a"), request("b")
    approvals.approve(a, by="user:alice")
    approvals.approve(b)
    assert approvals.taken_by("rm", a.digest) is None  # not used yet
    assert approvals.take("rm", a.digest) is True
    assert approvals.take("rm", b.digest) is True
    assert approvals.taken_by("rm", a.digest) == "user:alice"
    assert approvals.taken_by("rm", a.digest) is None  # asked once
    assert approvals.taken_by("rm", b.digest) == BY_DECISION


def test_a_denial_says_no_one_approved() -> None:
    approvals = Approvals()
    approvals.deny(request("a"), "no")
    assert approvals.take("rm", request("a").digest) == "no"
    assert approvals.taken_by("rm", request("a").digest) is None


def test_an_empty_by_is_refused() -> None:
    with pytest.raises(ValueError, match="by must name who or what approved"):
        Approvals().approve(request("a"), by="")


def test_grants_nobody_asks_about_are_not_kept_forever() -> None:
    approvals = Approvals()  # an executor without a journal never asks `taken_by`
    for index in range(5000):
        item = request(str(index))
        approvals.approve(item, by=f"user:{index}")
        assert approvals.take("rm", item.digest) is True
    assert len(approvals._taken) <= 1024
    assert approvals.taken_by("rm", request("4999").digest) == "user:4999"
