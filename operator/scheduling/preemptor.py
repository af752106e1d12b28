"""Carrying out a preemption: mark and delete (or evict) the victims.

The decision itself is ``podium.framework.preemption`` (pure); this module makes the
API calls, each with a "Preempted" Event, as kube-scheduler's Evaluator does. The
preemptor's own nomination is not written here: it goes with its PodScheduled
condition in one status write (``Binder.set_condition``), as handleSchedulingFailure does.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import UTC, datetime

import structlog

from podium.framework.preemption import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER, Candidate
from podium.kube.client import ApiError, KubeClient
from podium.kube.objects import PodInfo
from podium.kube.pdb import Pdb

__all__ = ["actuate", "preempt_victim", "set_nominated_node"]

log = structlog.get_logger("podium.scheduling.preemptor")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_path(pod: PodInfo) -> str:
    return f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"


async def set_nominated_node(client: KubeClient, pod: PodInfo, node: str) -> None:
    """PATCH pods/status nominatedNodeName ("" clears it)."""
    body = {"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": node or None}}
    try:
        await client.patch(_pod_path(pod) + "/status", body)
    except Exception as exc:
        if not isinstance(exc, ApiError) or exc.status != 404:
            log.warning("nominate_failed", pod=pod.name, namespace=pod.namespace, error=str(exc))


async def _preempted_event(
    client: KubeClient,
    instance: str,
    victim: PodInfo,
    preemptor: PodInfo,
    node: str,
    controller: str,
) -> None:
    body = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": f"{victim.name}.{secrets.token_hex(8)}",
            "namespace": victim.namespace,
        },
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": controller,
        "reportingInstance": instance,
        "action": "Preempting",
        "reason": "Preempted",
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": victim.namespace,
            "name": victim.name,
            "uid": victim.uid,
        },
        "related": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": preemptor.namespace,
            "name": preemptor.name,
            "uid": preemptor.uid,
        },
        "note": f"Preempted by pod {preemptor.uid} on node {node}",
        "type": "Normal",
    }
    try:
        await client.post(f"/apis/events.k8s.io/v1/namespaces/{victim.namespace}/events", body)
    except ApiError as exc:
        log.warning("preempted_event_failed", pod=victim.name, error=str(exc))


async def preempt_victim(
    client: KubeClient,
    victim: PodInfo,
    preemptor: PodInfo,
    node: str,
    scheduler_name: str,
    instance: str,
    covered: bool,
) -> bool:
    """PreemptPod: DisruptionTarget condition, then delete (or evict), then the Event.

    Returns False when the victim was gone already. A victim covered by a
    PodDisruptionBudget goes through the Eviction API; if the budget refuses
    (429), it is deleted anyway, as kube-scheduler does for the last-resort
    candidate that violates budgets.
    """
    condition = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
        "lastTransitionTime": _now(),
    }
    path = _pod_path(victim)
    try:
        await client.patch(
            path + "/status",
            {"metadata": {"uid": victim.uid}, "status": {"conditions": [condition]}},
        )
    except ApiError as exc:
        if exc.status in (404, 409):
            return False
        raise
    options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": victim.uid}}
    try:
        if covered:
            try:
                eviction = {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": victim.name, "namespace": victim.namespace},
                    "deleteOptions": options,
                }
                await client.post(path + "/eviction", eviction)
            except ApiError as exc:
                if exc.status != 429:
                    raise
                log.info("eviction_refused_deleting", pod=victim.name, namespace=victim.namespace)
                await client.delete(path, options)
        else:
            await client.delete(path, options)
    except ApiError as exc:
        if exc.status in (404, 409):
            return False
        raise
    log.info(
        "preempted",
        preemptor=preemptor.key,
        victim=victim.key,
        node=node,
    )
    await _preempted_event(client, instance, victim, preemptor, node, scheduler_name)
    return True


async def actuate(
    client: KubeClient,
    preemptor: PodInfo,
    candidate: Candidate,
    scheduler_name: str,
    instance: str,
    pdbs: Iterable[Pdb] = (),
    lower_nominated: Iterable[PodInfo] = (),
) -> bool:
    """prepareCandidate: preempt every victim, clear lower-priority nominations; False
    when a victim could not be preempted."""
    budgets = list(pdbs)
    for victim in candidate.victims:
        if victim.deleting:
            continue  # graceful deletion has started already
        covered = any(pdb.matches(victim) for pdb in budgets)
        try:
            await preempt_victim(
                client, victim, preemptor, candidate.node, scheduler_name, instance, covered
            )
        except Exception as exc:  # the preemptor retries; a later cycle picks again
            log.warning(
                "preempt_failed", preemptor=preemptor.key, victim=victim.key, error=str(exc)
            )
            return False
    for pod in lower_nominated:
        await set_nominated_node(client, pod, "")
    return True
