"""NodePreferAvoidPods: the 1.8-era preferAvoidPods annotation priority."""

from __future__ import annotations

import json
from typing import Any

import pytest

from podium.algorithms.node_prefer_avoid_pods import ANNOTATION, NodePreferAvoidPods
from podium.policy import default_profile

from .conftest import node, pod, run_score, snapshot


def avoid(*controllers: tuple[str, str]) -> dict[str, str]:
    body = {
        "preferAvoidPods": [
            {
                "podSignature": {
                    "podController": {
                        "apiVersion": "v1",
                        "kind": k,
                        "name": u,
                        "uid": u,
                        "controller": True,
                    }
                },
                "reason": "maintenance",
            }
            for k, u in controllers
        ]
    }
    return {ANNOTATION: json.dumps(body)}


CASES = [
    pytest.param(
        avoid(("ReplicaSet", "rs-1")),
        pod("p", owner=("ReplicaSet", "rs-1")),
        0,
        id="avoided-replicaset",
    ),
    pytest.param(
        avoid(("ReplicationController", "rc-1")),
        pod("p", owner=("ReplicationController", "rc-1")),
        0,
        id="avoided-replication-controller",
    ),
    pytest.param(
        avoid(("ReplicaSet", "rs-2")), pod("p", owner=("ReplicaSet", "rs-1")), 100, id="other-uid"
    ),
    pytest.param(
        avoid(("ReplicationController", "rs-1")),
        pod("p", owner=("ReplicaSet", "rs-1")),
        100,
        id="other-kind",
    ),
    pytest.param(
        avoid(("StatefulSet", "ss-1")),
        pod("p", owner=("StatefulSet", "ss-1")),
        100,
        id="statefulsets-ignored",
    ),
    pytest.param(avoid(("ReplicaSet", "rs-1")), pod("p"), 100, id="no-controller"),
    pytest.param(
        {ANNOTATION: "{not json"}, pod("p", owner=("ReplicaSet", "rs-1")), 100, id="bad-json"
    ),
    pytest.param({ANNOTATION: "[]"}, pod("p", owner=("ReplicaSet", "rs-1")), 100, id="wrong-shape"),
    pytest.param({}, pod("p", owner=("ReplicaSet", "rs-1")), 100, id="no-annotation"),
]


@pytest.mark.parametrize(("annotations", "incoming", "score"), CASES)
def test_score(annotations: dict[str, str], incoming: dict[str, Any], score: int) -> None:
    snap = snapshot([node("n1", annotations=annotations), node("n2")])
    assert run_score(NodePreferAvoidPods(), snap, incoming) == (
        {"n1": score, "n2": 100},
        {"n1": score, "n2": 100},
    )


def test_not_a_default_and_dominant_weight() -> None:
    assert "NodePreferAvoidPods" not in [p.name for p, _ in default_profile().scores]
    assert NodePreferAvoidPods.default_weight == 100
    assert NodePreferAvoidPods.description
