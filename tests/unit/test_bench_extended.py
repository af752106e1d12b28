"""The benchmark's extended-resource cases: parsing, their objects, and the placement check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.cases import CaseError, DynamicResources, ExtendedResource, load_cases, parse_case
from bench.validate import check_placements
from podium.kube.manifests import make_node, make_pod


def test_the_shipped_cases_parse_with_their_extended_resource_sections() -> None:
    cases = load_cases()
    plugin = cases["SchedulingWithExtendedResource"]
    assert plugin.extended == ExtendedResource("foo.com/bar", "devicePlugin")
    assert plugin.dra is None and not plugin.claim_template
    assert (plugin.measure.cpu, plugin.measure.memory) == (None, None)
    dra = cases["ExtendedResource"]
    assert dra.extended == ExtendedResource("example.com/gpu", "deviceClass", classes=25)
    assert dra.dra == DynamicResources(devices_per_node=10)
    assert not dra.claim_template
    assert cases["SchedulingWithResourceClaimTemplate"].claim_template


_DRA = {"dynamicResources": {"devicesPerNode": 2}}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"extendedResource": {"name": "a.com/b"}}, "missing key(s) source"),
        ({"extendedResource": {"name": "gpu", "source": "devicePlugin"}}, "extended resource name"),
        ({"extendedResource": {"name": "a.com/b", "source": "kubelet"}}, "must be devicePlugin"),
        (
            {"extendedResource": {"name": "a.com/b", "source": "devicePlugin", "classes": 2}},
            "only a deviceClass source has classes",
        ),
        (
            {"extendedResource": {"name": "a.com/b", "source": "devicePlugin"}, **_DRA},
            "takes no dynamicResources",
        ),
        (
            {"extendedResource": {"name": "a.com/b", "source": "deviceClass", "classes": 2}},
            "needs dynamicResources",
        ),
        (
            {"extendedResource": {"name": "a.com/b", "source": "deviceClass"}, **_DRA},
            "expected a positive integer",
        ),
        (
            {"extendedResource": {"name": "a.com/b", "source": "devicePlugin", "count": 1}},
            "unknown key(s) count",
        ),
    ],
)
def test_malformed_extended_resource_sections_are_rejected(
    extra: dict[str, Any], message: str
) -> None:
    raw = {"name": "X", "description": "x", "workloads": [{"name": "w", "nodes": 2}], **extra}
    with pytest.raises(CaseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_case(raw, Path("x.yaml"))


def test_a_device_plugin_case_needs_a_node_for_every_measured_pod() -> None:
    raw = {
        "name": "X",
        "description": "x",
        "extendedResource": {"name": "a.com/b", "source": "devicePlugin"},
        "workloads": [{"name": "w", "nodes": 2, "measurePods": 3}],
    }
    with pytest.raises(CaseError, match=r"measurePods <= nodes \(w\)"):
        parse_case(raw, Path("x.yaml"))


@pytest.mark.parametrize(
    ("extended", "index", "resource", "capacity", "classes"),
    [
        (ExtendedResource("a.com/b", "devicePlugin"), 7, "a.com/b-7", {"a.com/b-7": 1}, []),
        (
            ExtendedResource("e.com/gpu", "deviceClass", classes=3),
            7,
            "e.com/gpu-1",
            {},
            ["e.com/gpu-0", "e.com/gpu-1", "e.com/gpu-2"],
        ),
    ],
)
def test_each_pod_asks_for_its_resource_and_the_source_provides_it(
    extended: ExtendedResource,
    index: int,
    resource: str,
    capacity: dict[str, int],
    classes: list[str],
) -> None:
    assert extended.resource(index) == resource
    assert extended.node_capacity(index) == capacity
    made = extended.device_classes("drv", "r1")
    assert [c["spec"]["extendedResourceName"] for c in made] == classes
    for body in made:
        assert body["metadata"]["name"].startswith("r1-class-")
        assert body["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "drv"'}}]


def test_the_node_lists_and_the_pod_asks_for_the_extended_resource() -> None:
    case = load_cases()["SchedulingWithExtendedResource"]
    assert case.extended is not None
    node = case.node.manifest("n", 3, "r1", case.extended.node_capacity(3))
    assert node["status"]["capacity"]["foo.com/bar-3"] == "1"
    assert node["status"]["allocatable"]["foo.com/bar-3"] == "1"
    pod = case.measure.manifest("p", "s", "r1", "measure", {case.extended.resource(3): 1})
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"foo.com/bar-3": "1"},
        "limits": {"foo.com/bar-3": "1"},
    }


# -- the placement check -------------------------------------------------------------------

_GPU = "example.com/gpu"


def _klass(name: str, extended: str | None = _GPU) -> dict[str, Any]:
    spec = {"extendedResourceName": extended} if extended else {}
    return {"metadata": {"name": name}, "spec": spec}


def _pod(
    node: str, resource: str = _GPU, count: int = 1, claim: str | None = "c"
) -> dict[str, Any]:
    pod = make_pod("p", extended={resource: count})
    pod["metadata"].update(namespace="ns", uid="uid-p")
    pod["spec"]["nodeName"] = node
    if claim is not None:
        pod["status"] = {
            "extendedResourceClaimStatus": {
                "resourceClaimName": claim,
                "requestMappings": [
                    {
                        "containerName": "main",
                        "resourceName": resource,
                        "requestName": "container-0-request-0",
                    }
                ],
            }
        }
    return pod


def _claim(
    node: str = "n1",
    devices: int = 1,
    klass: str = "gpus",
    reserved: str = "p",
    allocated: bool = True,
) -> dict[str, Any]:
    holder = {"resource": "pods", "name": reserved, "uid": f"uid-{reserved}"}
    status: dict[str, Any] = {"reservedFor": [holder]}
    if allocated:
        status["allocation"] = {
            "devices": {
                "results": [
                    {
                        "request": "container-0-request-0",
                        "driver": "d",
                        "pool": node,
                        "device": f"dev-{i}",
                    }
                    for i in range(devices)
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        }
    request = {"name": "container-0-request-0", "exactly": {"deviceClassName": klass}}
    return {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": [request]}},
        "status": status,
    }


def _nodes(**extended: int) -> list[dict[str, Any]]:
    return [make_node("n1"), make_node("n2", extended={"foo.com/bar-2": 1, **extended})]


@pytest.mark.parametrize(
    ("pod", "claims", "classes", "expected"),
    [
        # device plugins: the node that lists the resource, or a violation of Fit
        (_pod("n2", "foo.com/bar-2", claim=None), [], [], {}),
        (_pod("n1", "foo.com/bar-2", claim=None), [], [], {"NodeResourcesFit": 1}),
        (_pod("n2", "foo.com/bar-2", 2, claim=None), [], [], {"NodeResourcesFit": 1}),
        # DRA: a class backs it and the node does not list it
        (_pod("n1"), [_claim()], [_klass("gpus")], {}),
        (
            _pod("n1", "deviceclass.resource.kubernetes.io/gpus"),
            [_claim()],
            [_klass("gpus", None)],
            {},
        ),
        (_pod("n1"), [_claim()], [], {"NodeResourcesFit": 1}),
        (
            _pod("n1", claim=None),
            [],
            [_klass("gpus")],
            {"DRA extended resource claim not allocated": 1},
        ),
        (
            _pod("n1"),
            [_claim(allocated=False)],
            [_klass("gpus")],
            {"DRA extended resource claim not allocated": 1},
        ),
        (
            _pod("n1"),
            [_claim(reserved="q")],
            [_klass("gpus")],
            {"DRA claim not reserved for its pod": 1},
        ),
        (
            _pod("n1"),
            [_claim(node="n2")],
            [_klass("gpus")],
            {"DRA claim allocated off the pod's node": 1},
        ),
        (
            _pod("n1"),
            [_claim(klass="other")],
            [_klass("gpus"), _klass("other", "example.com/tpu")],
            {"DRA extended resource not served": 1},
        ),
        (
            _pod("n1", count=2),
            [_claim()],
            [_klass("gpus")],
            {"DRA extended resource not served": 1},
        ),
        # a node listing the resource serves it by its device plugin, class or not
        (_pod("n2", claim=None), [], [_klass("gpus")], {}),
    ],
)
def test_extended_resources_are_served_by_the_node_or_by_the_pods_own_claim(
    pod: dict[str, Any],
    claims: list[dict[str, Any]],
    classes: list[dict[str, Any]],
    expected: dict[str, int],
) -> None:
    nodes = _nodes(**{_GPU: 1})
    check = check_placements([pod], nodes, claims=claims, device_classes=classes)
    assert dict(check.violations) == expected
