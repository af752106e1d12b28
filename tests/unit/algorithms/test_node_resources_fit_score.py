"""NodeResourcesFit's score counts the pod being scheduled by its containers alone.

kube-scheduler v1.37.2's ``NewFit`` (noderesources/fit.go) never sets its
``resourceAllocationScorer``'s ``enablePodLevelResources``, so
``calculatePodResourceRequest`` (resource_allocation.go) skips
``spec.resources``: LeastAllocated, MostAllocated and RequestedToCapacityRatio
count the containers with 100m / 200Mi for a container without a request.
The node's pods count pod level (NodeInfo's NonZeroRequested), and so do
BalancedAllocation and the Filter. Expected numbers are worked by hand from
those Go functions; the repro's final scores are kube-scheduler's own (issue 31).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from podium.algorithms.balanced_allocation import NodeResourcesBalancedAllocation
from podium.algorithms.node_resources_fit import NodeResourcesFit
from podium.framework.cycle import Scheduler
from podium.kube.objects import parse_pod
from podium.policy import default_profile

from .conftest import node, pod, run_filter, run_score, snapshot


def pod_level(body: dict[str, Any], **requests: str) -> dict[str, Any]:
    body["spec"]["resources"] = {"requests": dict(requests)}
    return body


def with_hugepages(body: dict[str, Any], amount: str) -> dict[str, Any]:
    for key in ("allocatable", "capacity"):
        body["status"][key] = {**body["status"][key], "hugepages-2Mi": amount}
    return body


def repro_cluster() -> list[dict[str, Any]]:
    """Issue 31: a small empty node and a large node with one 250m / 4Gi pod."""
    return [node("n0", cpu="1", memory="8Gi"), node("n1", cpu="8", memory="16Gi")]


def repro_existing() -> list[dict[str, Any]]:
    return [pod("old", cpu="250m", memory="4Gi", node_name="n1")]


def incoming_pod_level() -> dict[str, Any]:
    """Pod-level 900m / 6Gi (both, as the API server fills them), a container without requests."""
    return pod_level(pod("p"), cpu="900m", memory="6Gi")


RTCR_ARGS = {
    "strategy": "RequestedToCapacityRatio",
    "shape": [{"utilization": 0, "score": 0}, {"utilization": 50, "score": 10}],
}

# (id, plugin args, incoming pod, expected raw score by node)
FIT_CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, int]]] = [
    (
        # Containers: 100m / 200Mi. n0 (90 + 97) / 2; n1 (7650 / 8000, 12088Mi / 16Gi).
        "LeastAllocated, pod level with a container without requests",
        {},
        incoming_pod_level(),
        {"n0": 93, "n1": 84},
    ),
    (
        "LeastAllocated, the same amounts on the container",
        {},
        pod("p", cpu="900m", memory="6Gi"),
        {"n0": 17, "n1": 61},
    ),
    (
        # Containers: 300m and the 200Mi default; pod-level memory is not read.
        "LeastAllocated, pod level with container cpu only",
        {},
        pod_level(pod("p", cpu="300m"), cpu="900m", memory="6Gi"),
        {"n0": 83, "n1": 83},
    ),
    (
        # n0 (10 + 2) / 2; n1 (350m / 8 cpu = 4, 4296Mi / 16Gi = 26) / 2.
        "MostAllocated, pod level",
        {"strategy": "MostAllocated"},
        incoming_pod_level(),
        {"n0": 6, "n1": 15},
    ),
    (
        # Utilization n0 10 / 2 -> 20 / 4; n1 4 / 26 -> 8 / 52; shape scaled to 0..100.
        "RequestedToCapacityRatio, pod level",
        RTCR_ARGS,
        incoming_pod_level(),
        {"n0": 12, "n1": 30},
    ),
]


@pytest.mark.parametrize(
    ("args", "incoming", "expected"),
    [case[1:] for case in FIT_CASES],
    ids=[case[0] for case in FIT_CASES],
)
def test_fit_score_counts_containers(
    args: dict[str, Any], incoming: dict[str, Any], expected: dict[str, int]
) -> None:
    snap = snapshot(repro_cluster(), repro_existing())
    result = run_score(NodeResourcesFit(args), snap, incoming)
    assert result is not None
    assert result[0] == expected


def test_fit_score_hugepages_from_containers() -> None:
    """A scored scalar resource set at pod level also counts as the containers' sum."""
    snap = snapshot([with_hugepages(node("n0"), "64Mi")])
    incoming = pod_level(pod("p", cpu="1", memory="1Gi"), cpu="1", memory="1Gi")
    incoming["spec"]["resources"]["requests"]["hugepages-2Mi"] = "8Mi"
    incoming["spec"]["containers"][0]["resources"]["requests"]["hugepages-2Mi"] = "2Mi"
    args = {"resources": [{"name": "hugepages-2Mi", "weight": 1}]}
    result = run_score(NodeResourcesFit(args), snap, incoming)
    assert result is not None
    assert result[0] == {"n0": 96}  # (64 - 2) / 64, not (64 - 8) / 64


def test_filter_and_balanced_allocation_keep_pod_level() -> None:
    snap = snapshot(repro_cluster(), repro_existing())
    # 900m fits n0's 1 cpu; 1100m of pod-level cpu does not, though the container asks for none.
    assert run_filter(NodeResourcesFit(), snap, incoming_pod_level()) == {"n0": "", "n1": ""}
    too_big = pod_level(pod("p"), cpu="1100m", memory="6Gi")
    assert run_filter(NodeResourcesFit(), snap, too_big)["n0"] == "Insufficient cpu"
    result = run_score(NodeResourcesBalancedAllocation(), snap, incoming_pod_level())
    assert result is not None
    # n0: 50 + (50 + 92 - 100) / 2; n1: 50 + (50 + 75 - 89) / 2.
    assert result[0] == {"n0": 71, "n1": 68}


def test_repro_final_scores() -> None:
    """kube-scheduler's -v=10 final scores for issue 31's repro: n0 464, n1 452."""
    snap = snapshot(repro_cluster(), repro_existing())
    placement = Scheduler(random.Random(0)).schedule(
        default_profile(), snap, parse_pod(incoming_pod_level()), record=True
    )
    assert placement.totals is not None and placement.candidates is not None
    totals = {
        snap.names[int(i)]: int(t)
        for i, t in zip(placement.candidates, placement.totals, strict=True)
    }
    assert totals == {"n0": 464, "n1": 452}
    assert placement.node == "n0"
