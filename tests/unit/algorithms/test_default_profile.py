"""The default profile end to end: FailedScheduling messages and placements.

Runs podium.framework.cycle.schedule with podium.policy.default_profile() on small
clusters, and appends the preemption suffix the way the scheduler does.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from podium.algorithms.default_preemption import offline_message
from podium.framework.cycle import Scheduler
from podium.kube.objects import parse_pod
from podium.policy import default_profile

from .conftest import HOST, ZONE, node, on, pod, selecting, snapshot

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
WEB = {"app": "web"}
RS = ("ReplicaSet", "rs-web")
# Only the pods that RS owns are selected by it: default spreading applies to no other case.
SELECTORS = [selecting("ReplicaSet", "rs-web", {"matchLabels": WEB})]


def attempt(
    nodes: list[dict[str, Any]], existing: list[dict[str, Any]], incoming: dict[str, Any]
) -> tuple[str, str]:
    """(chosen node, "") or ("", the FailedScheduling message)."""
    snap = snapshot(nodes, existing, selectors=SELECTORS)
    profile = default_profile()
    target = parse_pod(incoming)
    placement = Scheduler(random.Random(7)).schedule(profile, snap, target)
    if placement.node:
        return placement.node, ""
    diagnosis = placement.diagnosis
    assert diagnosis is not None
    diagnosis.post_filter_msg = offline_message(profile, snap, target, diagnosis, random.Random(7))
    return "", diagnosis.message()


def names_in(*names: str) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": list(names)}
                        ]
                    }
                ]
            }
        }
    }


def anti(labels: dict[str, str], key: str = ZONE) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
            ]
        }
    }


def needs(labels: dict[str, str], key: str = ZONE) -> dict[str, Any]:
    return {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
            ]
        }
    }


def spread_web(key: str = ZONE) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": WEB},
        }
    ]


FAILURES = [
    pytest.param(
        [
            node("n1", zone="a", cpu="2"),
            node("n2", zone="a", cpu="2"),
            node("n3", zone="b", cpu="8"),
        ],
        [on("n1", pod("u1", cpu="1")), on("n2", pod("u2", cpu="1"))],
        pod("p", cpu="2", node_selector={ZONE: "a"}),
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient cpu. "
        f"preemption: 0/3 nodes are available: 1 {NOT_HELPFUL}, 2 {NO_VICTIMS}.",
        id="selector-and-cpu-in-use",
    ),
    pytest.param(
        [
            node("n1", zone="a", cpu="1"),
            node("n2", zone="a", cpu="1"),
            node("n3", zone="b", cpu="8"),
        ],
        [],
        pod("p", cpu="2", node_selector={ZONE: "a"}),
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 Insufficient cpu. "
        f"preemption: 0/3 nodes are available: 3 {NOT_HELPFUL}.",
        id="selector-and-cpu-above-allocatable",
    ),
    pytest.param(
        [node("n1", cpu="1"), node("n2"), node("n3")],
        [],
        pod("p", cpu="2", affinity=names_in("n1")),
        "0/3 nodes are available: 1 Insufficient cpu, "
        "2 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        f"preemption: 0/3 nodes are available: 3 {NOT_HELPFUL}.",
        id="prefilter-node-names",
    ),
    pytest.param(
        [node("n1"), node("n2"), node("n3")],
        [],
        pod(
            "p",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": ["n1"]},
                                    {"key": "metadata.name", "operator": "In", "values": ["n2"]},
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        # DynamicResources' PostFilter fails on its missing PreFilter state first.
        "0/3 nodes are available: pod affinity terms conflict. not found",
        id="prefilter-conflict",
    ),
    pytest.param(
        [node("n1"), node("n2")],
        [
            on(n, pod(f"old-{n}", ports=[{"containerPort": 80, "hostPort": 80}]))
            for n in ("n1", "n2")
        ],
        pod("p", ports=[{"containerPort": 8080, "hostPort": 80}]),
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports. "
        f"preemption: 0/2 nodes are available: 2 {NO_VICTIMS}.",
        id="host-ports",
    ),
    pytest.param(
        [node("n1", zone="a"), node("n2", zone="b")],
        [on("n1", pod("w1", WEB)), on("n2", pod("w2", WEB))],
        pod("p", affinity=anti(WEB)),
        "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. "
        f"preemption: 0/2 nodes are available: 2 {NO_VICTIMS}.",
        id="anti-affinity",
    ),
    pytest.param(
        [node("n1", zone="a"), node("n2", zone="b")],
        [],
        pod("p", affinity=needs({"app": "db"})),
        "0/2 nodes are available: 2 node(s) didn't match pod affinity rules. "
        f"preemption: 0/2 nodes are available: 2 {NOT_HELPFUL}.",
        id="affinity-unresolvable",
    ),
    pytest.param(
        [node("n1", zone="a"), node("n2", zone="b", cpu="1")],
        [on("n1", pod("guard", affinity=anti(WEB)))],
        pod("p", WEB, cpu="2"),
        "0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't satisfy existing pods anti-affinity rules. "
        f"preemption: 0/2 nodes are available: 1 {NO_VICTIMS}, 1 {NOT_HELPFUL}.",
        id="existing-anti-affinity",
    ),
    pytest.param(
        [node("n1", zone="a"), node("n2", zone="b", memory="1Gi"), node("n3")],
        [on("n1", pod("w1", WEB)), on("n1", pod("w2", WEB))],
        pod("p", WEB, memory="2Gi", spread=spread_web()),
        "0/3 nodes are available: 1 Insufficient memory, "
        "1 node(s) didn't match pod topology spread constraints, "
        "1 node(s) didn't match pod topology spread constraints (missing required label). "
        f"preemption: 0/3 nodes are available: 1 {NO_VICTIMS}, 2 {NOT_HELPFUL}.",
        id="topology-spread",
    ),
    pytest.param(
        [
            node("n1", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
            node("n2", {"disk": "hdd"}),
        ],
        [],
        pod("p", node_selector={"disk": "ssd"}, preemption_policy="Never"),
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s). "
        "preemption: not eligible due to preemptionPolicy=Never.",
        id="taint-before-affinity",
    ),
]


@pytest.mark.parametrize(("nodes", "existing", "incoming", "message"), FAILURES)
def test_failure_messages(
    nodes: list[dict[str, Any]],
    existing: list[dict[str, Any]],
    incoming: dict[str, Any],
    message: str,
) -> None:
    assert attempt(nodes, existing, incoming) == ("", message)


PREFERRED_ZONE_B = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "preference": {
                    "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]
                },
            }
        ]
    }
}
NEAR_DB = {
    "podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 50,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": ZONE,
                },
            }
        ]
    }
}
MB = 1024 * 1024

PLACEMENTS = [
    pytest.param(
        [node("n1", zone="a"), node("n2", zone="b"), node("n3", zone="c")],
        [],
        pod("p", affinity=PREFERRED_ZONE_B),
        "n2",
        id="preferred-node-affinity",
    ),
    pytest.param(
        [node("n1", zone="a"), node("n2", zone="b"), node("n3", zone="c")],
        [on("n3", pod("db", {"app": "db"}))],
        pod("p", affinity=NEAR_DB),
        "n3",
        id="preferred-pod-affinity-beats-the-db-pod-requests",
    ),
    pytest.param(
        [
            node("n1", zone="a", hostname=True),
            node("n2", zone="a", hostname=True),
            node("n3", zone="b", hostname=True),
        ],
        # One pod per node, so resources tie: only spreading rs-web's pods picks n2.
        [
            on("n1", pod("w1", WEB, owner=RS)),
            on("n2", pod("other", {"app": "other"})),
            on("n3", pod("w2", WEB, owner=RS)),
        ],
        pod("p", WEB, owner=RS),
        "n2",
        id="system-default-spreading",
    ),
    pytest.param(
        [node("n1", images={"big:1": 900 * MB}), node("n2"), node("n3")],
        [],
        pod("p", image="big:1"),
        "n1",
        id="image-locality",
    ),
    pytest.param(
        [node("n1", zone="a"), node("n2", zone="b")],
        [on("n1", pod("w1", WEB))],
        pod("p", WEB, spread=spread_web()),
        "n2",
        id="hard-spread-leaves-one-choice",
    ),
    pytest.param(
        [node("n1", zone="a", hostname=True), node("n2", zone="a", hostname=True)],
        [on("n1", pod("w1", WEB))],
        pod("p", WEB, affinity=anti(WEB, HOST)),
        "n2",
        id="hostname-anti-affinity",
    ),
]


@pytest.mark.parametrize(("nodes", "existing", "incoming", "chosen"), PLACEMENTS)
def test_placements(
    nodes: list[dict[str, Any]],
    existing: list[dict[str, Any]],
    incoming: dict[str, Any],
    chosen: str,
) -> None:
    assert attempt(nodes, existing, incoming) == (chosen, "")
