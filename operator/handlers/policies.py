"""SchedulerPolicy events → live profile changes, reported in the policy's status."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kopf
import structlog

from podium.kube.client import ApiError, KubeClient
from podium.policy import GROUP, PLURAL, VERSION, PolicyError, build_profile, default_profile
from podium.scheduling.scheduler import PodiumScheduler

log = structlog.get_logger("podium.handlers.policies")


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
    """``builtin`` is the schedulerName served by default while no policy claims it."""
    owners: dict[str, str] = {}  # schedulerName -> policy name

    async def report(name: str, body: dict[str, Any]) -> None:
        path = f"/apis/{GROUP}/{VERSION}/{PLURAL}/{name}/status"
        try:
            await client.patch(path, {"status": body}, kind="merge-patch")
        except ApiError as exc:
            log.warning("policy_status_failed", policy=name, error=str(exc))

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def policy_event(event: kopf.RawEvent, **_: Any) -> None:
        obj: dict[str, Any] = dict(event.get("object") or {})
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        generation = int(meta.get("generation") or 0)
        spec = obj.get("spec") or {}
        if event.get("type") == "DELETED":
            for scheduler_name, owner in list(owners.items()):
                if owner == name:
                    del owners[scheduler_name]
                    if scheduler_name == builtin:
                        scheduler.set_profile(default_profile(builtin))
                    else:
                        scheduler.remove_profile(scheduler_name)
                    log.info("policy_removed", policy=name, scheduler_name=scheduler_name)
            return
        status = obj.get("status") or {}
        observed = status.get("observedGeneration")
        try:
            profile = build_profile(spec, policy=name, generation=generation)
        except PolicyError as exc:
            if _already_reported(status, "Accepted", "False", str(exc), generation):
                return  # our own status write came back as an event
            scheduler.metrics.policy_reloads.labels("rejected").inc()
            log.warning("policy_rejected", policy=name, generation=generation, reasons=[str(exc)])
            await report(
                name,
                {
                    "conditions": [
                        _condition("Accepted", False, "InvalidPolicy", str(exc), generation),
                        _condition("Ready", False, "LastGoodPolicyInForce", str(exc), generation),
                    ]
                },
            )
            return
        claimant = owners.get(profile.scheduler_name)
        if claimant is not None and claimant != name:
            message = f"schedulerName {profile.scheduler_name!r} is served by policy {claimant!r}"
            if _already_reported(status, "Accepted", "False", message, generation):
                return
            await report(
                name,
                {"conditions": [_condition("Accepted", False, "Conflict", message, generation)]},
            )
            return
        for scheduler_name, previous in list(owners.items()):
            if previous == name and scheduler_name != profile.scheduler_name:
                del owners[scheduler_name]
                scheduler.remove_profile(scheduler_name)
        owners[profile.scheduler_name] = name
        current = scheduler.profiles.get(profile.scheduler_name)
        if (
            current is not None
            and current.policy == name
            and current.generation == generation
            and observed == generation
        ):
            return
        scheduler.set_profile(profile)
        scheduler.metrics.policy_reloads.labels("applied").inc()
        log.info(
            "policy_applied",
            policy=name,
            generation=generation,
            scheduler_name=profile.scheduler_name,
            plugins=profile.plugin_names(),
        )
        await report(
            name,
            {
                "observedGeneration": generation,
                "enabledPlugins": len(set(profile.plugin_names())),
                "conditions": [
                    _condition("Accepted", True, "Valid", "policy applied", generation),
                    _condition(
                        "Ready", True, "Serving", f"serving {profile.scheduler_name}", generation
                    ),
                ],
            },
        )
