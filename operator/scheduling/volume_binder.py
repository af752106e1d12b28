"""PreBind for VolumeBinding: write the chosen PV↔PVC bindings, then bind the pod.

kube-scheduler writes only ``spec.claimRef`` on each chosen PV and then
waits (``bindTimeoutSeconds``) for the PV controller in
kube-controller-manager to finish the bind; without that controller the pod
never binds. Podium finishes the bind itself, writing what the PV
controller's bind would, so a claim ends Bound with or without it:

1. PV: ``spec.claimRef`` (kind, namespace, name, uid, resourceVersion of the
   claim) and ``pv.kubernetes.io/bound-by-controller: "yes"``, by PUT with
   the cached resourceVersion (a PV taken meanwhile answers 409);
2. PVC: ``spec.volumeName`` and the annotations
   ``pv.kubernetes.io/bind-completed`` and ``bound-by-controller``, by PUT;
3. status ``phase: Bound`` on both (the PVC also gets the PV's capacity and
   access modes), through the status subresources.

A running PV controller sees a finished bind and only confirms it. Claims
left to dynamic provisioning get ``volume.kubernetes.io/selected-node``,
and Podium waits, like kube-scheduler, for the external provisioner and the
PV controller to bind them. Every written claim must read back fully bound
before ``bindTimeoutSeconds``; otherwise the caller reverts the assumption and retries
the pod with backoff.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from typing import Any

import structlog

from podium.algorithms.volume_binding import VolumePlan
from podium.kube.client import ApiError, KubeClient
from podium.kube.objects import PodInfo
from podium.state.volumes import (
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
    VolumeStore,
)

__all__ = ["VolumeBinder"]

log = structlog.get_logger("podium.scheduling.volume_binder")


def _claim_ref(claim: PersistentVolumeClaim) -> dict[str, str]:
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": claim.namespace,
        "name": claim.name,
        "uid": claim.uid,
        "resourceVersion": claim.resource_version,
    }


def _annotated(body: Mapping[str, Any], extra: Mapping[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(dict(body))
    meta = out.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), **extra}
    return out


class VolumeBinder:
    def __init__(self, client: KubeClient, store: VolumeStore, poll: float = 0.2) -> None:
        self.client = client
        self.store = store
        self.poll = poll

    def assume(self, plan: VolumePlan) -> None:
        """AssumePodVolumes: later cycles see the chosen PVs as taken."""
        for claim, pv in plan.static:
            self.store.assume(claim, pv)

    def revert(self, plan: VolumePlan) -> None:
        self.store.forget(pv.name for _, pv in plan.static)

    async def bind(self, pod: PodInfo, node: str, plan: VolumePlan, bind_timeout: float) -> str:
        """Write the plan and wait for the claims to be bound; '' on success, else why."""
        try:
            for claim, pv in plan.static:
                await self._bind_static(claim, pv)
            for claim in plan.provision:
                body = {"metadata": {"annotations": {SELECTED_NODE: node}}}
                path = f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.name}"
                self._seen(
                    "persistentvolumeclaims", await self.client.patch(path, body, "merge-patch")
                )
        except ApiError as exc:
            return f"binding volumes: {exc}"
        finally:
            self.revert(plan)
        try:
            async with asyncio.timeout(bind_timeout):
                # Polled, like checkBindings: the store changes through watch events.
                while not self._settled(plan):  # noqa: ASYNC110
                    await asyncio.sleep(self.poll)
        except TimeoutError:
            return "binding volumes: context deadline exceeded"
        log.info(
            "volumes_bound",
            pod=pod.name,
            namespace=pod.namespace,
            node=node,
            claims=[c.name for c, _ in plan.static] + [c.name for c in plan.provision],
        )
        return ""

    async def _bind_static(self, claim: PersistentVolumeClaim, pv: PersistentVolume) -> None:
        pv_body = _annotated(
            pv.raw, {} if pv.raw.get("spec", {}).get("claimRef") else {BOUND_BY_CONTROLLER: "yes"}
        )
        pv_body["spec"]["claimRef"] = _claim_ref(claim)
        pv_path = f"/api/v1/persistentvolumes/{pv.name}"
        written = await self.client.request("PUT", pv_path, pv_body)
        self._seen("persistentvolumes", written)
        pvc_body = _annotated(claim.raw, {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"})
        pvc_body.setdefault("spec", {})["volumeName"] = pv.name
        pvc_path = f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.name}"
        pvc_written = await self.client.request("PUT", pvc_path, pvc_body)
        self._seen("persistentvolumeclaims", pvc_written)
        written = copy.deepcopy(written)
        written["status"] = {**(written.get("status") or {}), "phase": "Bound"}
        self._seen(
            "persistentvolumes", await self.client.request("PUT", pv_path + "/status", written)
        )
        pvc_written = copy.deepcopy(pvc_written)
        pvc_written["status"] = {
            **(pvc_written.get("status") or {}),
            "phase": "Bound",
            "accessModes": list(pv.raw.get("spec", {}).get("accessModes") or []),
            "capacity": dict(pv.raw.get("spec", {}).get("capacity") or {}),
        }
        self._seen(
            "persistentvolumeclaims",
            await self.client.request("PUT", pvc_path + "/status", pvc_written),
        )

    def _seen(self, kind: str, body: Any) -> None:
        """Take a write's answer into the store at once, without waiting for the watch."""
        if isinstance(body, Mapping):
            self.store.apply(kind, "MODIFIED", body)

    def _settled(self, plan: VolumePlan) -> bool:
        """checkBindings: every claim fully bound, each static PV's claimRef still on it."""
        for claim, pv in plan.static:
            current = self.store.claim(claim.namespace, claim.name)
            volume = self.store.pvs.get(pv.name)
            if current is None or not current.fully_bound or current.volume_name != pv.name:
                return False
            if volume is None or not volume.bound_to(current):
                return False
        for claim in plan.provision:
            current = self.store.claim(claim.namespace, claim.name)
            if current is None or not current.fully_bound:
                return False
        return True
