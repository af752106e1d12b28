"""PolicyClaims: the oldest policy with a good spec serves a schedulerName, in any event order."""

from __future__ import annotations

import itertools

import pytest

from podium.handlers.policy_claims import Claim, PolicyClaims

A = Claim("f1a", "2026-12-05T10:00:00Z", "f1")
B = Claim("f1b", "2026-12-05T10:00:05Z", "f1")
C = Claim("f1c", "2026-12-05T10:00:05Z", "f1")  # same second as B: the name breaks the tie
OTHER = Claim("g", "2026-12-05T09:00:00Z", "g1")


@pytest.mark.parametrize("order", list(itertools.permutations([A, B, C, OTHER])))
def test_the_oldest_serves_whatever_the_arrival_order(order: tuple[Claim, ...]) -> None:
    claims = PolicyClaims()
    for claim in order:
        claims.claim(claim)
    assert claims.claimants("f1") == ["f1a", "f1b", "f1c"]
    assert claims.claimants("g1") == ["g"]


@pytest.mark.parametrize(
    ("steps", "changed", "claimants"),
    [
        # The serving policy is deleted: the next oldest is first, at once.
        ([("claim", A), ("claim", B), ("forget", "f1a")], {"f1"}, ["f1b"]),
        # The last claimant goes: nobody claims the name any more.
        ([("claim", B), ("forget", "f1b")], {"f1"}, []),
        # A policy moves to another name: both names are judged again.
        (
            [("claim", A), ("claim", B), ("claim", Claim("f1a", A.created, "f2"))],
            {"f1", "f2"},
            ["f1b"],
        ),
        # Forgetting a policy that never had a good spec changes nothing.
        ([("claim", A), ("forget", "nope")], set(), ["f1a"]),
    ],
)
def test_changes_name_the_schedulernames_to_judge_again(
    steps: list[tuple[str, Claim | str]], changed: set[str], claimants: list[str]
) -> None:
    claims = PolicyClaims()
    last: set[str] = set()
    for action, value in steps:
        if action == "claim":
            assert isinstance(value, Claim)
            last = claims.claim(value)
        else:
            assert isinstance(value, str)
            last = claims.forget(value)
    assert last == changed
    assert claims.claimants("f1") == claimants
