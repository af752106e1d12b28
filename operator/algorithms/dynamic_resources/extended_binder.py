"""The API writes of DRA-backed extended resources, in kube-scheduler v1.37.2's order.

PreBind (``bindClaim`` for the extended claim, after the pod's own claims):

1. ``create``: the claim, named by the API server from ``<pod>-extended-resources-``
   (createExtendedResourceClaimInAPI);
2. the finalizer, then ``status.allocation`` and ``reservedFor`` (the binder's usual
   claim writes);
3. ``record``: ``status.extendedResourceClaimStatus`` on the pod, its request
   mappings and the claim's name (patchPodExtendedResourceClaimStatus);

then the Binding. Unreserve and PostFilter ``delete`` a claim already created: the
finalizer goes first (an update, retried on conflicts), then the claim (deleteClaim).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any

import structlog

from podium.algorithms.dynamic_resources.extended import claim_body
from podium.framework.extension import ApiClient
from podium.kube.client import ApiError
from podium.kube.objects import PodInfo
from podium.state.dra import FINALIZER, Claim

__all__ = ["ExtendedWriteError", "create", "delete", "record"]

log = structlog.get_logger("podium.algorithms.dynamic_resources.extended_binder")

# client-go's retry.DefaultRetry: 5 tries.
RETRIES = 5
RETRY_DELAY = 0.01


class ExtendedWriteError(Exception):
    """A write failed; the message is Go's."""


def _claims_path(namespace: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"


async def create(client: ApiClient, node_claim: Mapping[str, Any]) -> Mapping[str, Any]:
    """createExtendedResourceClaimInAPI: the API server's answer (the named claim)."""
    body = claim_body(node_claim)
    namespace = str(body["metadata"].get("namespace") or "")
    try:
        created: Mapping[str, Any] = await client.post(_claims_path(namespace), body)
    except ApiError as exc:
        # klog.KObj of a claim without a name.
        raise ExtendedWriteError(
            f"create claim for extended resources {namespace}/: {exc.message}"
        ) from exc
    meta = created.get("metadata") or {}
    log.info("extended_claim_created", claim=f"{namespace}/{meta.get('name')}")
    return created


async def record(
    client: ApiClient, pod: PodInfo, claim_name: str, mappings: Sequence[Mapping[str, str]]
) -> None:
    """patchPodExtendedResourceClaimStatus: the pod's status names its claim and requests."""
    if not mappings:
        raise ExtendedWriteError(
            f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} "
            "ExtendedResourceClaimStatus"
        )
    patch = {
        "status": {
            "extendedResourceClaimStatus": {
                "requestMappings": [dict(m) for m in mappings],
                "resourceClaimName": claim_name,
            }
        },
    }
    path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
    try:
        await client.patch(path, patch)
    except ApiError as exc:
        raise ExtendedWriteError(
            f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: {exc.message}"
        ) from exc


async def delete(client: ApiClient, claim: Claim) -> None:
    """deleteClaim: drop the finalizer (re-reading after a conflict), then delete; a claim
    already gone is fine. Raises ApiError for any other failure."""
    path = f"{_claims_path(claim.namespace)}/{claim.name}"
    body: Mapping[str, Any] = claim.raw
    for attempt in range(RETRIES):
        if attempt:
            await asyncio.sleep(RETRY_DELAY * attempt)
            try:
                body = await client.get(path)
            except ApiError as exc:
                if exc.status == 404:
                    return
                raise
        updated = copy.deepcopy(dict(body))
        meta = updated.setdefault("metadata", {})
        meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
        try:
            await client.request("PUT", path, updated)
            break
        except ApiError as exc:
            if exc.status == 404:
                return
            if exc.status != 409 or attempt == RETRIES - 1:
                raise
    try:
        await client.delete(path)
    except ApiError as exc:
        if exc.status != 404:
            raise
    log.info("extended_claim_deleted", claim=claim.key)
