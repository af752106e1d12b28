"""The benchmark's DRA and gang cases: parsing, their objects, and the claim and gang checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.cases import CaseError, DynamicResources, Gang, load_cases, parse_case
from bench.validate import check_placements
from podium.devcluster.dra import POD_CLAIM_NAME, claim_from_template, template_refs
from podium.kube.manifests import make_node, make_pod


def test_the_shipped_cases_parse_with_their_dra_and_gang_sections() -> None:
    cases = load_cases()
    dra = cases["SchedulingWithResourceClaimTemplate"].dra
    assert dra == DynamicResources(devices_per_node=4)
    assert cases["GangScheduling"].gang == Gang(size=8)
    assert cases["SchedulingBasic"].dra is None and cases["SchedulingBasic"].gang is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"dynamicResources": {}}, "missing key(s) devicesPerNode"),
        ({"dynamicResources": {"devicesPerNode": 0}}, "expected a positive integer"),
        ({"dynamicResources": {"devicesPerNode": 2, "devices": 3}}, "unknown key(s) devices"),
        ({"gang": {"size": -1}}, "expected a non-negative integer"),
        ({"gang": {"minCount": 8}}, "unknown key(s) minCount"),
    ],
)
def test_malformed_dra_and_gang_sections_are_rejected(extra: dict[str, Any], message: str) -> None:
    raw = {"name": "X", "description": "x", "workloads": [{"name": "w", "nodes": 1}], **extra}
    with pytest.raises(CaseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_case(raw, Path("x.yaml"))


@pytest.mark.parametrize(
    ("pods", "size", "expected"),
    [(16, 8, [8, 8]), (20, 8, [8, 8, 4]), (3, 8, [3])],
)
def test_a_short_last_gang_gets_its_member_count_as_min_count(
    pods: int, size: int, expected: list[int]
) -> None:
    groups = Gang(size).pod_groups(pods, "r1")
    assert [g["spec"]["schedulingPolicy"]["gang"]["minCount"] for g in groups] == expected
    assert [g["metadata"]["name"] for g in groups] == [
        Gang(size).group_of(i * size) for i in range(len(expected))
    ]


def test_a_claim_from_a_template_is_owned_by_its_pod_and_named_after_it() -> None:
    pod = make_pod("p")
    pod["metadata"]["uid"] = "u-1"
    pod["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimTemplateName": "t"},
        {"name": "shared", "resourceClaimName": "c"},
    ]
    template = DynamicResources(2).claim_template("t", "cls", "r1")
    template["spec"]["metadata"] = {"labels": {"a": "b"}}
    assert template_refs(pod) == [("gpu", "t")]
    claim = claim_from_template(pod, "gpu", template)
    assert claim["metadata"]["name"].startswith("p-gpu-")
    assert len(claim["metadata"]["name"]) == len("p-gpu-") + 5
    assert claim["metadata"]["labels"] == {"a": "b"}
    assert claim["metadata"]["annotations"] == {POD_CLAIM_NAME: "gpu"}
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Pod",
        "p",
        "u-1",
        True,
    )
    assert claim["spec"] == template["spec"]["spec"]


def _node(name: str) -> dict[str, Any]:
    return make_node(name, cpu="4", memory="32Gi")


def _claim_pod(name: str, node: str, claim: str) -> dict[str, Any]:
    pod = make_pod(name)
    pod["metadata"].update(namespace="ns", uid=f"uid-{name}")
    pod["spec"]["nodeName"] = node
    pod["spec"]["resourceClaims"] = [{"name": "resource", "resourceClaimTemplateName": "t"}]
    pod["status"] = {"resourceClaimStatuses": [{"name": "resource", "resourceClaimName": claim}]}
    return pod


def _claim(
    name: str, device: str | None, node: str = "n1", reserved_for: str | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if device is not None:
        status["allocation"] = {
            "devices": {"results": [{"driver": "d", "pool": node, "device": device}]},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        }
    if reserved_for is not None:
        status["reservedFor"] = [
            {"resource": "pods", "name": reserved_for, "uid": f"uid-{reserved_for}"}
        ]
    return {"metadata": {"name": name, "namespace": "ns"}, "status": status}


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ([_claim("ca", "dev-0", reserved_for="a"), _claim("cb", "dev-1", reserved_for="b")], {}),
        (
            [_claim("ca", "dev-0", reserved_for="a"), _claim("cb", "dev-0", reserved_for="b")],
            {"DRA device allocated twice": 1},
        ),
        (
            [_claim("ca", None), _claim("cb", "dev-1", reserved_for="b")],
            {"DRA claim not allocated": 1},
        ),
        ([_claim("cb", "dev-1", reserved_for="b")], {"DRA claim not allocated": 1}),
        (
            [_claim("ca", "dev-0", reserved_for="b"), _claim("cb", "dev-1", reserved_for="b")],
            {"DRA claim not reserved for its pod": 1},
        ),
        (
            [_claim("ca", "dev-0", "n2", "a"), _claim("cb", "dev-1", reserved_for="b")],
            {"DRA claim allocated off the pod's node": 1},
        ),
    ],
)
def test_claims_are_checked_allocated_reserved_on_the_node_and_never_shared(
    claims: list[dict[str, Any]], expected: dict[str, int]
) -> None:
    pods = [_claim_pod("a", "n1", "ca"), _claim_pod("b", "n1", "cb")]
    check = check_placements(pods, [_node("n1"), _node("n2")], claims=claims)
    assert dict(check.violations) == expected


def _member(name: str, group: str, node: str | None) -> dict[str, Any]:
    pod = make_pod(name)
    pod["metadata"]["namespace"] = "ns"
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    if node:
        pod["spec"]["nodeName"] = node
    return pod


@pytest.mark.parametrize(
    ("bound", "expected"),
    [(0, {}), (2, {"partial gang": 1}), (3, {}), (1, {"partial gang": 1})],
)
def test_a_gang_is_bound_whole_or_not_at_all(bound: int, expected: dict[str, int]) -> None:
    pods = [_member(f"m{i}", "g", "n1" if i < bound else None) for i in range(3)]
    groups = [{**Gang(3).pod_groups(3, "r1")[0], "metadata": {"name": "g", "namespace": "ns"}}]
    check = check_placements(pods, [_node("n1")], pod_groups=groups)
    assert dict(check.violations) == expected
