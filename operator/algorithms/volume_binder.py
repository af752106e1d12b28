"""VolumeBinding's binding half (Reserve, PreBind, Unreserve; the plugin in
``volume_binding.py`` calls it): write the chosen PV↔PVC bindings before the Binding.

kube-scheduler writes only ``spec.claimRef`` on each chosen PV and then
waits (``bindTimeoutSeconds``) for the PV controller in
kube-controller-manager to finish the bind; without that controller the pod
never binds. Podium finishes the bind itself, writing what the PV
controller's bind would, so a claim ends Bound with or without it:

1. PV: ``spec.claimRef`` (kind, namespace, name, uid, resourceVersion of the
   claim) and ``pv.kubernetes.io/bound-by-controller: "yes"``, by PUT with
   the cached resourceVersion;
2. PVC: ``spec.volumeName`` and the annotations
   ``pv.kubernetes.io/bind-completed`` and ``bound-by-controller``, by PUT;
3. status ``phase: Bound`` on both (the PVC also gets the PV's capacity and
   access modes), through the status subresources.

A running PV controller sees a finished bind and only confirms it; it may also
write part of it first. Each write is therefore made on the object as last seen,
and a conflict (409) reads the object again and writes only what is still
missing; a PV or claim found bound to another claim or PV fails the bind (client-go's
5 tries at most). Members of one pod group that share a claim share its PV too,
so the second member finds the bind written, or being written, by the first and
only completes what is missing, then waits as below (kube-scheduler fails that
member's PreBind instead, its PV write conflicting, and places it again later, on
the PV's node). Claims
left to dynamic provisioning get ``volume.kubernetes.io/selected-node``,
and Podium waits, like kube-scheduler, for the external provisioner and the
PV controller to bind them. Every written claim must read back fully bound
before ``bindTimeoutSeconds``; otherwise the caller reverts the assumption and retries
the pod with backoff.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from podium.framework.extension import ApiClient
from podium.kube.client import ApiError
from podium.kube.objects import PodInfo
from podium.state.volumes import (
    BIND_COMPLETED,
    BOUND_BY_CONTROLLER,
    SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
    VolumeStore,
)

__all__ = ["VolumeBinder", "VolumePlan"]

log = structlog.get_logger("podium.algorithms.volume_binder")

# Tries of one write that conflicts (client-go's DefaultRetry count).
RETRIES = 5
# What a write's edit finds: the object needs it, already holds it, or is bound elsewhere.
WRITE, DONE, TAKEN = "write", "done", "taken"


@dataclass(slots=True)
class VolumePlan:
    """What PreBind must write for one pod on one node (Reserve's podVolumes)."""

    static: list[tuple[PersistentVolumeClaim, PersistentVolume]] = field(default_factory=list)
    provision: list[PersistentVolumeClaim] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.static and not self.provision

    @property
    def pre_flight(self) -> bool:
        """PreBindPreFlight: PreBind works (Success) unless every claim is bound (Skip)."""
        return not self.empty


def _claim_ref(claim: PersistentVolumeClaim) -> dict[str, str]:
    return {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": claim.namespace,
        "name": claim.name,
        "uid": claim.uid,
        "resourceVersion": claim.resource_version,
    }


class VolumeBinder:
    def __init__(self, client: ApiClient, store: VolumeStore, poll: float = 0.2) -> None:
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
        except ApiError as exc:  # bindAPIUpdate returns the API's error as it is
            return exc.message
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
        """The four writes of one bind, each made on the object as last seen; on a conflict
        the object is read again and only what is still missing is written: the PV
        controller, or another pod sharing the claim, may have written part of the bind
        meanwhile. A PV or claim found bound elsewhere fails the bind."""
        pv_path = f"/api/v1/persistentvolumes/{pv.name}"
        pvc_path = f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.name}"
        spec = pv.raw.get("spec") or {}

        def claim_ref(body: dict[str, Any]) -> str:
            ref = (body.get("spec") or {}).get("claimRef")
            if ref and (ref.get("namespace"), ref.get("name")) != (claim.namespace, claim.name):
                return TAKEN
            if ref and ref.get("uid") == claim.uid:
                return DONE
            if not ref:
                meta = body.setdefault("metadata", {})
                meta["annotations"] = {
                    **(meta.get("annotations") or {}),
                    BOUND_BY_CONTROLLER: "yes",
                }
            body.setdefault("spec", {})["claimRef"] = _claim_ref(claim)
            return WRITE

        def volume_name(body: dict[str, Any]) -> str:
            meta = body.setdefault("metadata", {})
            annotations = meta.get("annotations") or {}
            named = (body.get("spec") or {}).get("volumeName")
            if named and named != pv.name:
                return TAKEN
            if named and BIND_COMPLETED in annotations:
                return DONE
            meta["annotations"] = {**annotations, BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}
            body.setdefault("spec", {})["volumeName"] = pv.name
            return WRITE

        def pv_bound(body: dict[str, Any]) -> str:
            status = body.get("status") or {}
            if status.get("phase") == "Bound":
                return DONE
            body["status"] = {**status, "phase": "Bound"}
            return WRITE

        def pvc_bound(body: dict[str, Any]) -> str:
            status = body.get("status") or {}
            if status.get("phase") == "Bound":
                return DONE
            body["status"] = {
                **status,
                "phase": "Bound",
                "accessModes": list(spec.get("accessModes") or []),
                "capacity": dict(spec.get("capacity") or {}),
            }
            return WRITE

        stored = self.store.pvs.get(pv.name)
        seen_pv = stored.raw if stored is not None else pv.raw
        current = self.store.claim(claim.namespace, claim.name)
        seen_pvc = current.raw if current is not None and current.uid == claim.uid else claim.raw
        seen_pv = await self._update("persistentvolumes", pv_path, seen_pv, claim_ref)
        seen_pvc = await self._update("persistentvolumeclaims", pvc_path, seen_pvc, volume_name)
        await self._update("persistentvolumes", pv_path + "/status", seen_pv, pv_bound)
        await self._update("persistentvolumeclaims", pvc_path + "/status", seen_pvc, pvc_bound)

    async def _update(
        self, kind: str, path: str, seen: Mapping[str, Any], change: Callable[[dict[str, Any]], str]
    ) -> Mapping[str, Any]:
        """PUT ``change``'s edit of ``seen`` unless it says the object already holds it;
        on a conflict read the object again and edit that. The object as last known."""
        body = copy.deepcopy(dict(seen))
        conflict: ApiError | None = None
        for _ in range(RETRIES):
            verdict = change(body)
            if verdict == DONE:
                return body
            if verdict == TAKEN:
                name = (body.get("metadata") or {}).get("name")
                raise conflict or ApiError(409, {"message": f"{kind} {name} is bound elsewhere"})
            try:
                written = await self.client.request("PUT", path, body)
            except ApiError as exc:
                if exc.status != 409:
                    raise
                conflict = exc
                body = copy.deepcopy(dict(await self.client.get(path.removesuffix("/status"))))
                self._seen(kind, body)
                continue
            self._seen(kind, written)
            return dict(written)
        assert conflict is not None
        raise conflict

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
