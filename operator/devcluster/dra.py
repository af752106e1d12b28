"""The resourceclaim controller's part, for control planes that run no kube-controller-manager.

A pod whose ``spec.resourceClaims`` names a ResourceClaimTemplate waits until its claim
exists and ``status.resourceClaimStatuses`` names it. The e2e tests and the benchmark
make those claims exactly as the controller does: a claim named
``<pod>-<claim>-<5 random>`` with the template's spec, labels and annotations, owned by
the pod (controller, blockOwnerDeletion) and annotated
``resource.kubernetes.io/pod-claim-name``.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping
from typing import Any

__all__ = ["POD_CLAIM_NAME", "RESOURCE_API", "claim_from_template", "template_refs"]

RESOURCE_API = "resource.k8s.io/v1"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"


def template_refs(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(pod claim name, template name) for each of the pod's claims made from a template."""
    return [
        (str(ref["name"]), str(ref["resourceClaimTemplateName"]))
        for ref in (pod.get("spec") or {}).get("resourceClaims") or []
        if ref.get("resourceClaimTemplateName")
    ]


def claim_from_template(
    pod: Mapping[str, Any], claim_name: str, template: Mapping[str, Any]
) -> dict[str, Any]:
    """The ResourceClaim the controller creates for the pod's claim ``claim_name``.

    pod must be the created object (its uid goes into the owner reference).
    """
    meta = template["spec"].get("metadata") or {}
    pod_name = pod["metadata"]["name"]
    suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{pod_name}-{claim_name}-{suffix}",
            "labels": dict(meta.get("labels") or {}),
            "annotations": {**(meta.get("annotations") or {}), POD_CLAIM_NAME: claim_name},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod_name,
                    "uid": pod["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template["spec"]["spec"],
    }
