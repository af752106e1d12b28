"""DRA objects for e2e tests, and the resourceclaim controller's part done by the harness.

The session control plane runs no kube-controller-manager, so a pod's claims from
templates are made here as its resourceclaim controller makes them
(podium.devcluster.dra, shared with the benchmark), then the pod's
``status.resourceClaimStatuses`` patched with their names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from podium.devcluster.dra import claim_from_template, template_refs

GROUP, VERSION = "resource.k8s.io", "v1"
DRIVER = "gpu.example.com"
# The binding conditions of gated devices (DRADeviceBindingConditions).
ATTACHED, ATTACH_FAILED = "example.com/Attached", "example.com/AttachFailed"


def device_class(name: str, selector: str | None = None) -> dict[str, Any]:
    expression = selector or f'device.driver == "{DRIVER}"'
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def device(name: str, **attributes: str | int | bool) -> dict[str, Any]:
    """A device with typed attributes (string, int or bool)."""
    typed: dict[str, Any] = {}
    for key, value in attributes.items():
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
        typed[key] = {kind: value}
    return {"name": name, "attributes": typed}


def gated_device(name: str, **attributes: str | int | bool) -> dict[str, Any]:
    """A device the scheduler may bind a pod to only once its driver reports ATTACHED
    True in the claim's status.devices (ATTACH_FAILED True: never)."""
    return {
        **device(name, **attributes),
        "bindingConditions": [ATTACHED],
        "bindingFailureConditions": [ATTACH_FAILED],
        "bindsToNode": True,
    }


def resource_slice(
    name: str, node: str, devices: Sequence[Mapping[str, Any]], driver: str = DRIVER
) -> dict[str, Any]:
    """One slice holding the whole pool of ``node``."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [dict(d) for d in devices],
        },
    }


def exactly(name: str, device_class_name: str, count: int = 1, *selectors: str) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": device_class_name, "count": count}
    if selectors:
        request["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": request}


def claim_spec(*requests: Mapping[str, Any]) -> dict[str, Any]:
    return {"devices": {"requests": [dict(r) for r in requests]}}


def claim_template(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": dict(spec)},
    }


def resource_claim(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": dict(spec),
    }


def with_claims(
    pod: dict[str, Any], templates: Mapping[str, str] = {}, claims: Mapping[str, str] = {}
) -> dict[str, Any]:
    """Add spec.resourceClaims (pod claim name -> template or claim name), used by container 0."""
    refs = [{"name": n, "resourceClaimTemplateName": t} for n, t in templates.items()]
    refs += [{"name": n, "resourceClaimName": c} for n, c in claims.items()]
    pod["spec"]["resourceClaims"] = refs
    container = pod["spec"]["containers"][0]
    container.setdefault("resources", {})["claims"] = [{"name": r["name"]} for r in refs]
    return pod


class Dra:
    """Creates DRA objects for one test and deletes the cluster-scoped ones afterwards."""

    def __init__(self, api: ApiClient, namespace: str) -> None:
        self.api = api
        self.namespace = namespace
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self._cluster: list[tuple[str, str]] = []

    async def create(self, plural: str, body: Mapping[str, Any]) -> dict[str, Any]:
        if plural in ("resourceclaims", "resourceclaimtemplates"):
            made: dict[str, Any] = await self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, dict(body)
            )
            return made
        made = await self.custom.create_cluster_custom_object(GROUP, VERSION, plural, dict(body))
        self._cluster.append((plural, str(made["metadata"]["name"])))
        return made

    async def gpus(self, nodes: Sequence[str], per_node: int, template: str = "") -> str:
        """A DeviceClass, ``per_node`` devices (``gpu-<i>``, attribute ``index``) in a slice
        on each node and, when named, a claim template for one of them; the class name."""
        klass = f"{self.namespace}-gpu"
        await self.create("deviceclasses", device_class(klass))
        for node in nodes:
            devices = [device(f"gpu-{i}", index=i) for i in range(per_node)]
            await self.create("resourceslices", resource_slice(f"{node}-gpus", node, devices))
        if template:
            spec = claim_spec(exactly("gpu", klass))
            await self.create("resourceclaimtemplates", claim_template(template, spec))
        return klass

    async def claims(self) -> list[dict[str, Any]]:
        listed = await self.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "resourceclaims"
        )
        return list(listed["items"])

    async def instantiate(self, pod_name: str) -> list[str]:
        """The resourceclaim controller's work for one pod: claims from its templates."""
        raw = await self.core.read_namespaced_pod(pod_name, self.namespace, _preload_content=False)
        pod = await raw.json()
        statuses = []
        for claim_name, template_name in template_refs(pod):
            template = await self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "resourceclaimtemplates", template_name
            )
            claim = claim_from_template(pod, claim_name, template)
            made = await self.create("resourceclaims", claim)
            statuses.append({"name": claim_name, "resourceClaimName": made["metadata"]["name"]})
        if statuses:
            await self.core.patch_namespaced_pod_status(
                pod_name, self.namespace, {"status": {"resourceClaimStatuses": statuses}}
            )
        return [s["resourceClaimName"] for s in statuses]

    async def allocate(self, name: str, allocation: Mapping[str, Any]) -> None:
        """Write a claim's status.allocation as a scheduler would (devices taken)."""
        claim = await self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "resourceclaims", name
        )
        claim["status"] = {"allocation": dict(allocation)}
        await self.custom.replace_namespaced_custom_object_status(
            GROUP, VERSION, self.namespace, "resourceclaims", name, claim
        )

    async def report(self, name: str, condition: str) -> None:
        """What a driver does: ``condition`` set True for the claim's allocated device in
        its status.devices (retried on a conflict with the scheduler's writes)."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for _ in range(10):
            claim = await self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "resourceclaims", name
            )
            (result,) = claim["status"]["allocation"]["devices"]["results"]
            reported = {
                "type": condition,
                "status": "True",
                "reason": "Driver",
                "message": "reported by the test",
                "lastTransitionTime": now,
            }
            claim["status"]["devices"] = [
                {**{k: result[k] for k in ("driver", "pool", "device")}, "conditions": [reported]}
            ]
            try:
                await self.custom.replace_namespaced_custom_object_status(
                    GROUP, VERSION, self.namespace, "resourceclaims", name, claim
                )
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raise AssertionError(f"claim {name} kept changing")

    async def delete_claim(self, name: str) -> None:
        """Drop the finalizer (no controller does it here), then delete."""
        claim = await self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "resourceclaims", name
        )
        if claim["metadata"].get("finalizers"):
            await self.custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                "resourceclaims",
                name,
                [{"op": "remove", "path": "/metadata/finalizers"}],
            )
        await self.custom.delete_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "resourceclaims", name
        )

    async def delete(self, plural: str, name: str) -> None:
        """Delete one cluster-scoped object now (not at cleanup)."""
        await self.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        self._cluster.remove((plural, name))

    async def cleanup(self) -> None:
        """Claims lose their finalizers (no controller does it here); cluster objects go."""
        for claim in await self.claims():
            if claim["metadata"].get("finalizers"):
                await self.custom.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    self.namespace,
                    "resourceclaims",
                    claim["metadata"]["name"],
                    [{"op": "remove", "path": "/metadata/finalizers"}],
                )
        for plural, name in reversed(self._cluster):
            await self.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)


def allocated_devices(claims: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """Every (driver, pool, device) allocated to a claim, duplicates kept."""
    return [
        (r["driver"], r["pool"], r["device"])
        for c in claims
        for r in ((c.get("status") or {}).get("allocation") or {})
        .get("devices", {})
        .get("results", [])
    ]
