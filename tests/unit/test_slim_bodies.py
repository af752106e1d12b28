"""What a cached pod or node keeps of its body: every field a reader of ``.raw`` needs."""

from __future__ import annotations

from typing import Any

import pytest

from podium.kube.objects import parse_node, parse_pod

_MANAGED = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]


@pytest.mark.parametrize(
    ("body", "kept", "dropped"),
    [
        pytest.param(
            {
                "metadata": {
                    "uid": "u1",
                    "name": "p",
                    "managedFields": _MANAGED,
                    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                    "ownerReferences": [{"kind": "ReplicaSet", "controller": True}],
                },
                "spec": {"containers": [{"name": "c", "image": "pause"}]},
                "status": {"startTime": "2026-01-01T00:00:00Z"},
            },
            [("metadata", "ownerReferences"), ("spec", "containers"), ("status", "startTime")],
            [("metadata", "managedFields"), ("metadata", "annotations")],
            id="pod",
        ),
        pytest.param(
            {"metadata": {"uid": "u2", "name": "plain"}, "spec": {}},
            [("metadata", "name")],
            [],
            id="pod-without-dropped-fields",
        ),
    ],
)
def test_pod_keeps_what_readers_need(
    body: dict[str, Any], kept: list[tuple[str, str]], dropped: list[tuple[str, str]]
) -> None:
    pod = parse_pod(body)
    for part, key in kept:
        assert pod.raw[part][key] == body[part][key]
    for part, key in dropped:
        assert key not in pod.raw[part]
        assert key in body[part]  # the event's body itself is left as it was


def test_node_keeps_annotations_and_version() -> None:
    body = {
        "metadata": {
            "name": "n1",
            "resourceVersion": "7",
            "managedFields": _MANAGED,
            "annotations": {"scheduler.alpha.kubernetes.io/preferAvoidPods": "{}"},
        },
        "status": {
            "allocatable": {"cpu": "4"},
            "images": [{"names": ["pause:3"], "sizeBytes": 10}],
        },
    }
    node = parse_node(body)
    assert node.raw["metadata"]["resourceVersion"] == "7"
    assert node.raw["metadata"]["annotations"] == body["metadata"]["annotations"]
    assert "managedFields" not in node.raw["metadata"]
    assert "images" not in node.raw["status"]
    assert node.images == {"pause:3": 10}
    assert node.allocatable["cpu"] == 4000
