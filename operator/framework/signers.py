"""The shared pod signers of kube-scheduler's opportunistic batching (KEP-5598).

A port of ``k8s.io/kube-scheduler/framework/signers.go``: the fragment keys and the
signers that several plugins share. Values only need to compare equal exactly when
Go's would; they are canonicalised (sorted) the way Go's signers sort them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from podium.kube.objects import PodInfo

__all__ = [
    "FEATURES",
    "HOST_PORTS",
    "IMAGE_NAMES",
    "LABELS",
    "NODE_AFFINITY",
    "NODE_NAME",
    "NODE_SELECTOR",
    "RESOURCES",
    "SCHEDULER_NAME",
    "TOLERATIONS",
    "VOLUMES",
    "host_ports_signer",
    "node_affinity_signer",
    "tolerations_signer",
    "volumes_signer",
]

SCHEDULER_NAME = "v1.Pod.Spec.SchedulerName"
NODE_NAME = "v1.Pod.Spec.NodeName"
NODE_AFFINITY = "v1.Pod.Spec.Affinity.NodeAffinity"
NODE_SELECTOR = "v1.Pod.Spec.NodeSelector"
HOST_PORTS = "v1.Pod.Spec.Containers.Ports.HostPort"
RESOURCES = "v1.Pod.Spec.Containers.Resources.Requests"
IMAGE_NAMES = "v1.Pod.Spec.Containers.Image"
LABELS = "v1.Pod.ObjectMeta.Labels"
TOLERATIONS = "v1.Pod.Spec.Tolerations"
VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
FEATURES = "v1.Pod.Spec.RequiredFeatures()"


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def host_ports_signer(pod: PodInfo) -> list[int]:
    """HostPortsSigner: the distinct non-zero host port numbers, sorted (protocol and IP
    are not part of it)."""
    return sorted({p.port for p in pod.host_ports if p.port})


def _requirements(reqs: object) -> list[str]:
    """NodeSelectorRequirementsSigner: each requirement with sorted values, sorted."""
    out = []
    for req in reqs if isinstance(reqs, list) else []:
        item = dict(req) if isinstance(req, Mapping) else {}
        if isinstance(item.get("values"), list):
            item["values"] = sorted(str(v) for v in item["values"])
        out.append(_canonical(item))
    return sorted(out)


def _term(term: object) -> dict[str, list[str]]:
    """NodeSelectorTermSigner."""
    term = term if isinstance(term, Mapping) else {}
    return {
        "MatchExpressions": _requirements(term.get("matchExpressions")),
        "MatchFields": _requirements(term.get("matchFields")),
    }


def node_affinity_signer(pod: PodInfo) -> dict[str, list[str]] | None:
    """NodeAffinitySigner: required and preferred node-affinity terms, each sorted; None
    when the pod has no nodeAffinity."""
    node_affinity = pod.affinity.get("nodeAffinity")
    if not isinstance(node_affinity, Mapping):
        return None
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    pref = sorted(
        _canonical({"Weight": t.get("weight", 0), "Preference": _term(t.get("preference"))})
        for t in (preferred if isinstance(preferred, list) else [])
        if isinstance(t, Mapping)
    )
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    req = sorted(_canonical(_term(t)) for t in (terms if isinstance(terms, list) else []))
    return {"Required": req, "Preferred": pref}


def tolerations_signer(pod: PodInfo) -> list[str]:
    """TolerationsSigner: the whole tolerations (tolerationSeconds too), sorted by key,
    then value."""
    spec = pod.raw.get("spec")
    raw = spec.get("tolerations") if isinstance(spec, Mapping) else None
    items = [t for t in (raw if isinstance(raw, list) else []) if isinstance(t, Mapping)]
    items.sort(key=lambda t: (str(t.get("key") or ""), str(t.get("value") or "")))
    return [_canonical(t) for t in items]


def volumes_signer(pod: PodInfo) -> list[str]:
    """VolumesSigner: every volume's source but configMap and secret ones (they differ
    from pod to pod and never matter to scheduling); the volume's name is left out."""
    out = []
    for volume in pod.volumes:
        if "configMap" in volume or "secret" in volume:
            continue
        out.append(_canonical({k: v for k, v in volume.items() if k != "name"}))
    return out
