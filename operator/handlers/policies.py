"""SchedulerPolicy events → live profile changes, reported in the policy's status."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kopf
import structlog

from podium.framework.profile import Profile
from podium.handlers.policy_claims import Claim, PolicyClaims
from podium.kube.client import ApiError, KubeClient
from podium.kube.kinds import Kind
from podium.policy import GROUP, PLURAL, VERSION, PolicyError, build_profile, default_profile
from podium.scheduling.scheduler import PodiumScheduler

log = structlog.get_logger("podium.handlers.policies")

POLICIES = Kind(GROUP, VERSION, PLURAL, "SchedulerPolicy", namespaced=False)


def _condition(kind: str, ok: bool, reason: str, message: str, generation: int) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message[:1024],
        "observedGeneration": generation,
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def _already_reported(
    status: dict[str, Any], kind: str, value: str, message: str, generation: int
) -> bool:
    for cond in status.get("conditions") or []:
        if cond.get("type") == kind:
            return bool(
                cond.get("status") == value
                and cond.get("message") == message[:1024]
                and cond.get("observedGeneration") == generation
            )
    return False


def register_policies(
    registry: kopf.OperatorRegistry,
    scheduler: PodiumScheduler,
    client: KubeClient,
    builtin: str,
) -> None:
    """``builtin`` is the schedulerName served by default while no policy claims it.

    Several policies may name one schedulerName: the oldest serves (``PolicyClaims``) and
    the others say Accepted=False Conflict until it goes, when the next takes over.
    """
    claims = PolicyClaims()
    # Each policy's last spec that built, with its generation, and its last seen status.
    good: dict[str, tuple[dict[str, Any], int]] = {}
    statuses: dict[str, dict[str, Any]] = {}
    # Each policy's last seen resourceVersion: what the resync compares with its LIST.
    versions: dict[str, str] = {}

    async def report(name: str, body: dict[str, Any]) -> None:
        path = f"/apis/{GROUP}/{VERSION}/{PLURAL}/{name}/status"
        try:
            await client.patch(path, {"status": body}, kind="merge-patch")
        except ApiError as exc:
            log.warning("policy_status_failed", policy=name, error=str(exc))

    def settle(scheduler_name: str, fresh: Profile | None) -> list[tuple[str, dict[str, Any]]]:
        """Install the profile of ``scheduler_name``'s rightful policy (``fresh`` when the
        event being handled brought it) and return the status writes that say so."""
        order = claims.claimants(scheduler_name)
        if not order:
            if claims.serving.pop(scheduler_name, None) is not None:
                if scheduler_name == builtin:
                    scheduler.set_profile(default_profile(builtin))
                else:
                    scheduler.remove_profile(scheduler_name)
                log.info("policy_removed", scheduler_name=scheduler_name)
            return []
        winner, writes = order[0], []
        spec, generation = good[winner]
        claims.serving[scheduler_name] = winner
        current = scheduler.profiles.get(scheduler_name)
        if current is None or (current.policy, current.generation) != (winner, generation):
            if fresh is None or fresh.policy != winner:
                fresh = build_profile(spec, policy=winner, generation=generation)
            scheduler.set_profile(fresh)
            scheduler.metrics.policy_reloads.labels("applied").inc()
            log.info(
                "policy_applied",
                policy=winner,
                generation=generation,
                scheduler_name=scheduler_name,
                plugins=fresh.plugin_names(),
            )
        elif statuses.get(winner, {}).get("observedGeneration") == generation:
            fresh = None  # our own status write came back as an event
        else:
            fresh = current
        if fresh is not None:
            writes.append(
                (
                    winner,
                    {
                        "observedGeneration": generation,
                        "enabledPlugins": len(set(fresh.plugin_names())),
                        "conditions": [
                            _condition("Accepted", True, "Valid", "policy applied", generation),
                            _condition(
                                "Ready", True, "Serving", f"serving {scheduler_name}", generation
                            ),
                        ],
                    },
                )
            )
        message = f"schedulerName {scheduler_name!r} is served by policy {winner!r}"
        for loser in order[1:]:
            loser_generation = good[loser][1]
            status = statuses.get(loser, {})
            if not _already_reported(status, "Accepted", "False", message, loser_generation):
                condition = _condition("Accepted", False, "Conflict", message, loser_generation)
                writes.append((loser, {"conditions": [condition]}))
        return writes

    def deleted(name: str) -> list[tuple[str, dict[str, Any]]]:
        """The policy is gone: its names go to the next claimant (or back to the default)."""
        good.pop(name, None)
        statuses.pop(name, None)
        versions.pop(name, None)
        writes = [w for sn in claims.forget(name) for w in settle(sn, None)]
        log.info("policy_deleted", policy=name)
        return writes

    async def write_all(writes: list[tuple[str, dict[str, Any]]]) -> None:
        for policy, body in writes:
            await report(policy, body)

    def forget(name: str) -> None:
        """A policy deleted while the watches were down: kopf's relist brings no DELETED."""
        scheduler.spawn(write_all(deleted(name)))

    scheduler.resync.watch_store(POLICIES, lambda: versions, forget)

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def policy_event(event: kopf.RawEvent, **_: Any) -> None:
        obj: dict[str, Any] = dict(event.get("object") or {})
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        generation = int(meta.get("generation") or 0)
        spec = obj.get("spec") or {}
        if event.get("type") == "DELETED":
            writes = deleted(name)
        else:
            versions[name] = str(meta.get("resourceVersion") or "")
            status = statuses[name] = obj.get("status") or {}
            try:
                profile = build_profile(spec, policy=name, generation=generation)
            except PolicyError as exc:
                if _already_reported(status, "Accepted", "False", str(exc), generation):
                    return  # our own status write came back as an event
                scheduler.metrics.policy_reloads.labels("rejected").inc()
                log.warning(
                    "policy_rejected", policy=name, generation=generation, reasons=[str(exc)]
                )
                await report(
                    name,
                    {
                        "conditions": [
                            _condition("Accepted", False, "InvalidPolicy", str(exc), generation),
                            _condition(
                                "Ready", False, "LastGoodPolicyInForce", str(exc), generation
                            ),
                        ]
                    },
                )
                return
            good[name] = (dict(spec), generation)
            created = str(meta.get("creationTimestamp") or "")
            changed = claims.claim(Claim(name, created, profile.scheduler_name))
            writes = [w for sn in sorted(changed) for w in settle(sn, profile)]
        await write_all(writes)
