"""DefaultPreemption's Executor: mark and delete (or evict) the victims.

The decision itself is ``podium.framework.preemption`` (pure); this module makes the
API calls, each with a "Preempted" Event, as kube-scheduler's ``preemption.Executor``
does. The preemptor's own nomination is not written here: it goes with its PodScheduled
condition in one status write (``Binder.set_condition``), as handleSchedulingFailure does.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from podium.framework.extension import ApiClient
from podium.framework.preemption import DISRUPTION_TARGET, PREEMPTION_BY_SCHEDULER, Candidate
from podium.kube.client import ApiError
from podium.kube.objects import PodInfo
from podium.kube.pdb import Pdb
from podium.state.podgroups import WORKLOAD_API, PodGroup

WORKLOAD_GROUP_VERSION = WORKLOAD_API.removeprefix("/apis/")

__all__ = ["actuate", "actuate_group", "preempt_victim", "set_nominated_node"]

log = structlog.get_logger("podium.algorithms.default_preemption")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod_path(pod: PodInfo) -> str:
    return f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"


async def set_nominated_node(client: ApiClient, pod: PodInfo, node: str) -> None:
    """PATCH pods/status nominatedNodeName ("" clears it)."""
    body = {"metadata": {"uid": pod.uid}, "status": {"nominatedNodeName": node or None}}
    try:
        await client.patch(_pod_path(pod) + "/status", body)
    except Exception as exc:
        if not isinstance(exc, ApiError) or exc.status != 404:
            log.warning("nominate_failed", pod=pod.name, namespace=pod.namespace, error=str(exc))


@dataclass(frozen=True, slots=True)
class Preemptor:
    """Who preempts, as Go's ExecutorPreemptor: a pod, or a PodGroup ("podgroup")."""

    kind: str  # "Pod" or "PodGroup", the Event's related object
    type: str  # "pod" or "podgroup", in the condition and the Event's note
    namespace: str
    name: str
    uid: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _preemptor(pod: PodInfo) -> Preemptor:
    return Preemptor("Pod", "pod", pod.namespace, pod.name, pod.uid)


async def _preempted_event(
    client: ApiClient,
    instance: str,
    victim: PodInfo,
    preemptor: Preemptor,
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
            "apiVersion": "v1" if preemptor.kind == "Pod" else WORKLOAD_GROUP_VERSION,
            "kind": preemptor.kind,
            "namespace": preemptor.namespace,
            "name": preemptor.name,
            "uid": preemptor.uid,
        },
        "note": f"Preempted by {preemptor.type} {preemptor.uid} on node {node}",
        "type": "Normal",
    }
    try:
        await client.post(f"/apis/events.k8s.io/v1/namespaces/{victim.namespace}/events", body)
    except ApiError as exc:
        log.warning("preempted_event_failed", pod=victim.name, error=str(exc))


def _has_condition(pod: PodInfo, condition: dict[str, str]) -> bool:
    """The pod carries ``condition`` already, but for its transition time (a retry after
    a refused deletion): kube-scheduler's UpdatePodCondition then writes nothing."""
    held = pod.conditions.get(condition["type"]) or {}
    return all(held.get(k) == condition[k] for k in ("status", "reason", "message"))


async def preempt_victim(
    client: ApiClient,
    victim: PodInfo,
    preemptor: Preemptor,
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
        "message": (
            f"{scheduler_name}: preempting to accommodate a higher priority {preemptor.type}"
        ),
        "lastTransitionTime": _now(),
    }
    path = _pod_path(victim)
    if not _has_condition(victim, condition):  # UpdatePodCondition: unchanged, not written
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


async def _preempt_all(
    client: ApiClient,
    victims: Iterable[PodInfo],
    preemptor: Preemptor,
    node: str,
    scheduler_name: str,
    instance: str,
    pdbs: Iterable[Pdb],
) -> bool:
    """Preempt each victim not already being deleted; the first refusal stops the rest
    and makes it False, so that the caller activates the preemptor (no deletion event
    may come to move it)."""
    budgets = list(pdbs)
    for victim in victims:
        if victim.deleting:
            continue  # graceful deletion has started already
        covered = any(pdb.matches(victim) for pdb in budgets)
        try:
            await preempt_victim(client, victim, preemptor, node, scheduler_name, instance, covered)
        except Exception as exc:
            log.warning(
                "preempt_failed", preemptor=preemptor.key, victim=victim.key, error=str(exc)
            )
            return False
    return True


async def actuate(
    client: ApiClient,
    preemptor: PodInfo,
    candidate: Candidate,
    scheduler_name: str,
    instance: str,
    pdbs: Iterable[Pdb] = (),
    lower_nominated: Iterable[PodInfo] = (),
) -> bool:
    """prepareCandidateAsync: clear lower-priority nominations on the node, then preempt the
    victims (``_preempt_all``)."""
    for pod in lower_nominated:
        await set_nominated_node(client, pod, "")
    return await _preempt_all(
        client,
        candidate.victims,
        _preemptor(preemptor),
        candidate.node,
        scheduler_name,
        instance,
        pdbs,
    )


async def actuate_group(
    client: ApiClient,
    group: PodGroup,
    victims: Iterable[PodInfo],
    scheduler_name: str,
    instance: str,
    pdbs: Iterable[Pdb] = (),
) -> bool:
    """actuatePodGroupPreemption: preempt every victim for the group (Go's node "cluster")."""
    preemptor = Preemptor("PodGroup", "podgroup", group.namespace, group.name, group.uid)
    return await _preempt_all(client, victims, preemptor, "cluster", scheduler_name, instance, pdbs)
