"""Which SchedulerPolicy serves each schedulerName when several name it.

The rule: of the policies that claim a schedulerName with a spec Podium could apply, the
oldest serves (``metadata.creationTimestamp``, then name); the others are in conflict. A
policy keeps its claim while its later edits are rejected, since its last good profile
stays in force. The rule depends only on the policies, not on the order their events
arrive, so a restarted Podium or a standby picks the same server, and deleting the one
that serves hands the name to the next oldest at once.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Claim", "PolicyClaims"]


@dataclass(frozen=True, slots=True)
class Claim:
    policy: str
    # metadata.creationTimestamp as the API server writes it (RFC 3339, UTC, whole
    # seconds), so that string order is time order.
    created: str
    scheduler_name: str

    def key(self) -> tuple[str, str]:
        return (self.created, self.policy)


class PolicyClaims:
    """The claims of every policy with a good spec, and who serves each name."""

    def __init__(self) -> None:
        self._claims: dict[str, Claim] = {}
        self.serving: dict[str, str] = {}  # schedulerName -> policy

    def claim(self, claim: Claim) -> set[str]:
        """Record a policy's good spec; returns the schedulerNames whose server may have
        changed (the one it claims now, and one it claimed before)."""
        previous = self._claims.get(claim.policy)
        self._claims[claim.policy] = claim
        names = {claim.scheduler_name}
        if previous is not None:
            names.add(previous.scheduler_name)
        return names

    def forget(self, policy: str) -> set[str]:
        """A deleted policy; returns the schedulerName it claimed, if any."""
        previous = self._claims.pop(policy, None)
        return {previous.scheduler_name} if previous is not None else set()

    def claimants(self, scheduler_name: str) -> list[str]:
        """Every policy claiming ``scheduler_name``, oldest first."""
        claims = [c for c in self._claims.values() if c.scheduler_name == scheduler_name]
        return [c.policy for c in sorted(claims, key=Claim.key)]
