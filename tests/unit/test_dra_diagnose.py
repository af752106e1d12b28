"""Why a pod's claims cannot be allocated on a node, per request, and how explain shows it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from podium.algorithms.dynamic_resources.diagnose import ClaimDiagnoser, RequestProblem
from podium.tools.explain.cluster import ClusterState, explain_state
from podium.tools.explain.output import format_table
from tests.unit.builders import node, pod

DRIVER = "gpu.example.com"
NS = "default"


def device(name: str, numa: int = 0, model: str = "a100", **extra: Any) -> dict[str, Any]:
    attributes = {"numa": {"int": numa}, "model": {"string": model}}
    return {"name": name, "attributes": attributes, **extra}


def resource_slice(node_name: str, devices: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": list(devices),
        },
    }


def device_class(name: str = DRIVER, expression: str = "") -> dict[str, Any]:
    expression = expression or f'device.driver == "{DRIVER}"'
    return {
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def request(
    name: str = "gpu", count: int = 1, expression: str = "", klass: str = DRIVER, **extra: Any
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": klass, "count": count, **extra}
    if expression:
        exactly["selectors"] = [{"cel": {"expression": expression}}]
    return {"name": name, "exactly": exactly}


def claim(
    name: str,
    requests: Sequence[Mapping[str, Any]],
    constraints: Sequence[Mapping[str, Any]] = (),
    held: Sequence[str] = (),
    node_name: str = "n1",
) -> dict[str, Any]:
    """A ResourceClaim; ``held`` devices of ``node_name`` make it an allocated one."""
    body: dict[str, Any] = {
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": list(requests), "constraints": list(constraints)}},
    }
    if held:
        results = [
            {"request": "gpu", "driver": DRIVER, "pool": node_name, "device": d} for d in held
        ]
        body["status"] = {"allocation": {"devices": {"results": results}}}
    return body


FOUR = [device(f"g{i}", numa=i % 2) for i in range(4)]
MODEL_B = 'device.attributes["gpu.example.com"].model == "h100"'


def _diagnose(
    claims: Sequence[Mapping[str, Any]],
    others: Sequence[Mapping[str, Any]] = (),
    devices: Sequence[Mapping[str, Any]] = FOUR,
    classes: Sequence[Mapping[str, Any]] = (device_class(),),
) -> list[RequestProblem]:
    allocations = {
        f"{NS}/{c['metadata']['name']}": c["status"]["allocation"] for c in others if "status" in c
    }
    diagnoser = ClaimDiagnoser(
        {c["metadata"]["name"]: c for c in classes},
        [resource_slice("n1", devices)],
        allocations,
    )
    return diagnoser.node({"metadata": {"name": "n1", "labels": {}}}, claims)


@pytest.mark.parametrize(
    ("claims", "others", "devices", "classes", "expected"),
    [
        (
            [claim("c", [request(count=2)])],
            [],
            [],
            [device_class()],
            ["claim default/c request gpu: 2 wanted, the node has no devices"],
        ),
        (
            [claim("c", [request(count=2)])],
            [claim("a", [request()], held=["g0"]), claim("b", [request()], held=["g1", "g2"])],
            FOUR,
            [device_class()],
            ["claim default/c request gpu: 2 wanted, 4 devices match the selectors, 3 taken"],
        ),
        (
            [claim("c", [request()])],
            [],
            FOUR,
            [device_class(expression='device.driver == "other.example.com"')],
            [
                "claim default/c request gpu: 1 wanted, 0 devices match the class "
                '"gpu.example.com" selectors'
            ],
        ),
        (
            [claim("c", [request(expression=MODEL_B)])],
            [],
            FOUR,
            [device_class()],
            [
                "claim default/c request gpu: 1 wanted, 0 of the 4 devices of class "
                '"gpu.example.com" match the request selectors'
            ],
        ),
        (
            [claim("c", [request(count=3)], [{"matchAttribute": f"{DRIVER}/numa"}])],
            [],
            FOUR,
            [device_class()],
            [
                "claim default/c: enough devices are free, but matchAttribute "
                '"gpu.example.com/numa" fails'
            ],
        ),
        (
            [
                claim(
                    "c",
                    [request("a"), request("b")],
                    [{"distinctAttribute": f"{DRIVER}/numa", "requests": ["a", "b"]}],
                )
            ],
            [claim("x", [request()], held=["g1", "g3"])],
            FOUR,
            [device_class()],
            [
                "claim default/c: enough devices are free, but distinctAttribute "
                '"gpu.example.com/numa" fails'
            ],
        ),
        (
            [claim("c", [request("a", count=2)]), claim("d", [request("b", count=2)])],
            [claim("x", [request()], held=["g0"])],
            FOUR,
            [device_class()],
            ["claim default/c: each request has free devices, but not all of them together"],
        ),
        (
            [claim("c", [request()])],
            [],
            [device("g0", taints=[{"key": "broken", "effect": "NoSchedule"}])],
            [device_class()],
            [
                "claim default/c request gpu: 1 wanted, 1 devices match the selectors, "
                "0 taken, 1 tainted"
            ],
        ),
        (
            [claim("c", [request(count=2)])],
            [claim("a", [request()], held=["g0"])],
            FOUR,
            [device_class()],
            [],
        ),
    ],
    ids=[
        "no-devices",
        "taken",
        "class-matches-nothing",
        "request-selector-matches-nothing",
        "match-attribute",
        "distinct-attribute-with-taken-devices",
        "two-claims-together",
        "tainted",
        "fits",
    ],
)
def test_diagnose_one_node(
    claims: list[dict[str, Any]],
    others: list[dict[str, Any]],
    devices: list[dict[str, Any]],
    classes: list[dict[str, Any]],
    expected: list[str],
) -> None:
    got = _diagnose(claims, others, devices, classes)
    assert [p.sentence() for p in got] == expected


def test_a_cel_error_is_reported_with_its_text() -> None:
    (problem,) = _diagnose([claim("c", [request(expression="device.attributes.nope.x == 1")])])
    assert problem.kind == "error"
    assert problem.error
    assert problem.sentence() == f"claim default/c request gpu: {problem.error}"


def test_taken_devices_name_their_claims() -> None:
    (problem,) = _diagnose(
        [claim("c", [request(count=2)])],
        [claim("a", [request()], held=["g0"]), claim("b", [request()], held=["g1", "g2"])],
    )
    assert problem.to_dict() | {"message": ""} == {
        "claim": "default/c",
        "request": "gpu",
        "kind": "taken",
        "deviceClass": DRIVER,
        "wanted": 2,
        "nodeDevices": 4,
        "classMatching": 4,
        "matching": 4,
        "taken": 3,
        "tainted": 0,
        "takenBy": ["default/a", "default/b"],
        "constraints": [],
        "error": None,
        "message": "",
    }


def test_first_available_is_a_problem_only_when_no_subrequest_fits() -> None:
    subs = [
        {"name": "big", "deviceClassName": DRIVER, "count": 8},
        {"name": "small", "deviceClassName": DRIVER, "count": 5},
    ]
    got = _diagnose([claim("c", [{"name": "gpu", "firstAvailable": subs}])])
    assert [p.sentence() for p in got] == [
        "claim default/c request gpu/big: 8 wanted, 4 devices match the selectors, 0 taken",
        "claim default/c request gpu/small: 5 wanted, 4 devices match the selectors, 0 taken",
    ]
    subs[1]["count"] = 4
    assert _diagnose([claim("c", [{"name": "gpu", "firstAvailable": subs}])]) == []


def _explain(
    requests: Sequence[Mapping[str, Any]], storage: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Any], str]:
    the_pod = pod("p", cpu="1", resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}])
    docs = [device_class(), claim("c", requests), *storage]
    state = ClusterState(
        pod=the_pod,
        nodes=[node("n1"), node("n2")],
        pods=[the_pod],
        policies=None,
        storage=[dict(d) for d in docs],
    )
    exp = explain_state(state)
    return json.loads(json.dumps(exp.to_dict())), format_table(exp)


@pytest.mark.parametrize(
    ("requests", "storage", "lines", "suggestions"),
    [
        (
            [request(count=2)],
            [
                resource_slice("n1", FOUR[:2]),
                resource_slice("n2", FOUR[:2]),
                claim("a", [request()], held=["g0"]),
                claim("b", [request()], held=["g1"], node_name="n2"),
            ],
            [
                "  DynamicResources, per node:",
                "    n1: claim default/c request gpu: 2 wanted, 2 devices match the selectors, "
                "1 taken",
                "    n2: claim default/c request gpu: 2 wanted, 2 devices match the selectors, "
                "1 taken",
            ],
            [
                "claim default/c request gpu: at most 1 device(s) free on one node (n1)",
                "claim default/c request gpu: devices held by default/a, default/b",
            ],
        ),
        (
            [request(expression=MODEL_B)],
            [resource_slice("n1", FOUR), resource_slice("n2", FOUR)],
            [
                "  DynamicResources, per node:",
                "    n1: claim default/c request gpu: 1 wanted, 0 of the 4 devices of class "
                '"gpu.example.com" match',
                "      the request selectors",
                "    n2: claim default/c request gpu: 1 wanted, 0 of the 4 devices of class "
                '"gpu.example.com" match',
                "      the request selectors",
            ],
            [
                'claim default/c request gpu: no device matches the class "gpu.example.com" '
                "and request selectors on any node"
            ],
        ),
    ],
    ids=["count-and-holders", "selectors-match-nothing"],
)
def test_explain_shows_unmet_requests_per_node(
    requests: list[dict[str, Any]],
    storage: list[dict[str, Any]],
    lines: list[str],
    suggestions: list[str],
) -> None:
    got, text = _explain(requests, storage)
    rows = {r["node"]: r for r in got["rows"]}
    assert {n: r["plugin"] for n, r in rows.items()} == {
        "n1": "DynamicResources",
        "n2": "DynamicResources",
    }
    assert all(r["reasons"] == ["cannot allocate all claims"] for r in rows.values())
    assert all(r["claims"] for r in rows.values())
    assert got["suggestions"] == suggestions
    text_lines = text.splitlines()
    start = text_lines.index(lines[0])
    block = text_lines[start : text_lines.index("", start)]
    assert block == lines
    assert max(len(line) for line in block) <= 100
