"""The test-side port of kube-scheduler's accounting, against cases from the Go tests.

Cases named "go: ..." are taken from k8s.io/component-helpers@v0.37.2
resource/helpers_test.go (test function, then case name); their pods carry no
pod-level status unless the Go case sets one, so the Go code path is the one
the Go test ran.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from tests.kube_accounting import (
    Overbooking,
    is_scalar_resource_name,
    milli_value,
    overbookings,
    parse_quantity,
    pod_requests,
    pod_resource,
    resource_list,
    value_of,
)


def ctr(name: str = "", **requests: str) -> dict[str, Any]:
    """A container; "_" in a keyword stands for "-" (other names via **{...})."""
    body: dict[str, Any] = {"name": name, "resources": {}}
    if requests:
        body["resources"]["requests"] = {k.replace("_", "-"): v for k, v in requests.items()}
    return body


def sidecar(name: str = "", **requests: str) -> dict[str, Any]:
    """A restartable init container."""
    return {**ctr(name, **requests), "restartPolicy": "Always"}


def cst(
    name: str = "", allocated: dict[str, str] | None = None, actual: dict[str, str] | None = None
) -> dict[str, Any]:
    """A container status with allocatedResources and resources.requests."""
    body: dict[str, Any] = {"name": name}
    if allocated is not None:
        body["allocatedResources"] = allocated
    if actual is not None:
        body["resources"] = {"requests": actual}
    return body


def pod(
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    statuses: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    *,
    pod_level: dict[str, str] | None = None,
    overhead: dict[str, str] | None = None,
    resize: str | None = None,
    pod_allocated: dict[str, str] | None = None,
    pod_actual: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers or []}
    if init:
        spec["initContainers"] = init
    if pod_level is not None:
        spec["resources"] = {"requests": pod_level}
    if overhead is not None:
        spec["overhead"] = overhead
    status: dict[str, Any] = {}
    if statuses:
        status["containerStatuses"] = statuses
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    if resize:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": resize}]
    if pod_allocated is not None:
        status["allocatedResources"] = pod_allocated
    if pod_actual is not None:
        status["resources"] = pod_actual
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("0", Fraction(0)),
        ("1", Fraction(1)),
        ("100m", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        ("+2", Fraction(2)),
        ("-1.5m", Fraction(-3, 2000)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        ("1Ki", Fraction(1024)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("2k", Fraction(2000)),
        ("30M", Fraction(30 * 10**6)),
        ("1E", Fraction(10**18)),
        ("1e3", Fraction(1000)),
        ("12E-3", Fraction(12, 1000)),
        ("1e+2", Fraction(100)),
        ("5n", Fraction(5, 10**9)),
        ("7u", Fraction(7, 10**6)),
        ("1.0000000001", Fraction(1_000_000_001, 10**9)),  # rounded up to 1n on parse
        ("0.1n", Fraction(1, 10**9)),
    ],
)
def test_parse_quantity(text: str, exact: Fraction) -> None:
    assert parse_quantity(text) == exact


@pytest.mark.parametrize("text", ["", "m", "abc", "1X", "1Kii", "1.2.3", "1e", "--1", "1 "])
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="quantity"):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "milli", "units"),
    [
        ("1", 1000, 1),
        ("100m", 100, 1),
        ("0.5m", 1, 1),
        ("1n", 1, 1),
        ("1.5", 1500, 2),
        ("1Ki", 1024000, 1024),
        ("-1.5m", -2, -1),
        ("0", 0, 0),
    ],
)
def test_milli_value_and_value_round_up(text: str, milli: int, units: int) -> None:
    assert milli_value(parse_quantity(text)) == milli
    assert value_of(parse_quantity(text)) == units


def test_int64_overflow_is_an_error() -> None:
    with pytest.raises(ValueError, match="overflows"):
        milli_value(parse_quantity("1E") * 10)


RESIZE_4_TO_2 = [cst("container-1", actual={"cpu": "2"})]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # go: TestPodResourceRequests
        pytest.param(
            pod([ctr(cpu="1")], [ctr(cpu="4")]),
            {"cpu": "4"},
            id="go: nil options, larger init container",
        ),
        pytest.param(
            pod([ctr(cpu="2"), ctr(cpu="3")], [ctr(cpu="2")]),
            {"cpu": "5"},
            id="go: nil options, larger containers",
        ),
        pytest.param(
            pod(
                [ctr(cpu="2"), ctr(cpu="3")], [ctr(cpu="2")], overhead={"cpu": "1", "memory": "1Gi"}
            ),
            {"cpu": "6", "memory": "1Gi"},
            id="go: pod overhead included",
        ),
        pytest.param(
            pod([ctr("container-1", cpu="4")], statuses=RESIZE_4_TO_2, resize="Infeasible"),
            {"cpu": "2"},
            id="go: resized, infeasible",
        ),
        pytest.param(
            pod(
                [ctr("container-1", cpu="6")],
                statuses=[cst("container-1", allocated={"cpu": "4"}, actual={"cpu": "2"})],
                resize="Infeasible",
            ),
            {"cpu": "4"},
            id="go: resized, infeasible & in-progress",
        ),
        pytest.param(
            pod([ctr("container-1", cpu="4")], statuses=RESIZE_4_TO_2),
            {"cpu": "4"},
            id="go: resized, no resize status",
        ),
        pytest.param(
            pod(
                [ctr("container-1", cpu="30m", memory="20M", ephemeral_storage="10G")],
                statuses=[
                    cst(
                        "container-1",
                        allocated={"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
                        actual={"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                    )
                ],
            ),
            {"cpu": "30m", "memory": "30M", "ephemeral-storage": "30G"},
            id="go: resized: per-resource 3-way maximum",
        ),
        pytest.param(
            pod(
                init=[sidecar("restartable-init-1", cpu="4")],
                init_statuses=[cst("restartable-init-1", actual={"cpu": "2"})],
                resize="Infeasible",
            ),
            {"cpu": "2"},
            id="go: resized, restartable init container, infeasible",
        ),
        pytest.param(
            pod(
                init=[sidecar("restartable-init-1", cpu="4")],
                init_statuses=[cst("restartable-init-1", actual={"cpu": "2"})],
            ),
            {"cpu": "4"},
            id="go: resized, restartable init container, no resize status",
        ),
        pytest.param(
            pod([ctr("container-1", cpu="1")], [sidecar("restartable-init-1", cpu="1")]),
            {"cpu": "2"},
            id="go: restartable init container",
        ),
        pytest.param(
            pod(
                [ctr("container-1", cpu="1")],
                [
                    ctr("init-1", cpu="5"),
                    sidecar("restartable-init-1", cpu="1"),
                    sidecar("restartable-init-2", cpu="2"),
                    sidecar("restartable-init-3", cpu="3"),
                ],
            ),
            {"cpu": "7"},
            id="go: multiple restartable init containers",
        ),
        pytest.param(
            pod(
                [ctr("container-1", cpu="1")],
                [
                    ctr("init-1", cpu="5"),
                    sidecar("restartable-init-1", cpu="1"),
                    sidecar("restartable-init-2", cpu="2"),
                    ctr("init-2", cpu="5"),
                    sidecar("restartable-init-3", cpu="3"),
                ],
            ),
            {"cpu": "8"},
            id="go: multiple restartable and regular init containers",
        ),
        pytest.param(
            pod(
                [ctr("container-1", cpu="100")],
                [sidecar("restartable-init-1", cpu="10"), ctr("init-1", cpu="200")],
            ),
            {"cpu": "210"},
            id="go: restartable-init, init and regular",
        ),
        pytest.param(
            pod(
                [ctr("c1", cpu="1"), ctr("c2", cpu="2")],
                statuses=[cst("c1", allocated={"cpu": "2"}), cst("c2", allocated={"cpu": "1"})],
            ),
            {"cpu": "3"},
            id="go: aggregate request resolves max of sums instead of sum of maxes",
        ),
        # go: TestPodLevelResourceRequests
        pytest.param(
            pod(pod_level={"memory": "2Mi"}),
            {"memory": "2Mi"},
            id="go: pod level memory resource with SkipPodLevelResources false",
        ),
        pytest.param(
            pod([ctr(cpu="2m")], pod_level={"memory": "2Mi"}),
            {"memory": "2Mi", "cpu": "2m"},
            id="go: pod level memory and container level cpu resources",
        ),
        pytest.param(
            pod([ctr(storage="3Mi")], pod_level={"storage": "2Mi"}),
            {"storage": "3Mi"},
            id="go: pod level unsupported resources set at both pod-level and container-level",
        ),
        pytest.param(
            pod([ctr(memory="3Mi")], pod_level={"storage": "2Mi"}),
            {"memory": "3Mi"},
            id="go: pod level unsupported resources set at pod-level",
        ),
        pytest.param(
            pod([ctr(memory="3Mi", cpu="2m")], pod_level={"memory": "6Mi", "cpu": "8m"}),
            {"memory": "6Mi", "cpu": "8m"},
            id="go: both container-level and pod-level resources set",
        ),
        pytest.param(
            pod(
                [ctr(memory="3Mi", cpu="2m")],
                [sidecar(memory="5Mi", cpu="4m"), ctr(memory="6Mi", cpu="8m")],
            ),
            {"memory": "11Mi", "cpu": "12m"},
            id="go: container-level resources, init and sidecar container set",
        ),
        pytest.param(
            pod(
                [ctr(memory="3Mi", cpu="2m")],
                [sidecar(memory="5Mi", cpu="4m"), ctr(memory="6Mi", cpu="8m")],
                pod_level={"memory": "15Mi", "cpu": "18m"},
            ),
            {"memory": "15Mi", "cpu": "18m"},
            id="go: pod-level resources, container-level resources, init and sidecar container set",
        ),
        pytest.param(
            pod(
                [ctr(memory="4Mi", hugepages_1Gi="1Gi")],
                pod_level={"cpu": "1", "hugepages-2Mi": "10Mi"},
            ),
            {"cpu": "1", "memory": "4Mi", "hugepages-2Mi": "10Mi", "hugepages-1Gi": "1Gi"},
            id="go: pod-level resources, container-level resources, hugepage request/limit "
            "multiple page sizes between pod-level and container-level",
        ),
        # go: TestAggregateContainerRequestsAndLimits
        pytest.param(
            pod([ctr("container-1")], statuses=[cst("container-1", actual={"cpu": "2"})]),
            {"cpu": "2"},
            id="go: regularcontainers with empty requests, but status with non-empty requests",
        ),
        pytest.param(
            pod(
                init=[sidecar("container-1")],
                init_statuses=[cst("container-1", actual={"cpu": "2"})],
            ),
            {"cpu": "2"},
            id="go: always-restart init containers with empty requests, but status with "
            "non-empty requests",
        ),
        pytest.param(
            pod(
                [ctr("c1", cpu="1")],
                pod_allocated={"cpu": "4"},
                pod_actual={"requests": {"cpu": "3"}, "limits": {"cpu": "5"}},
            ),
            {"cpu": "4"},
            id="go: aggregate container request/limit resolves directly from pod status when "
            "PLR vertical scaling enabled",
        ),
        pytest.param(
            pod(
                [ctr("c1", cpu="1")],
                statuses=[cst("c1", allocated={"cpu": "6"}, actual={"cpu": "5"})],
                pod_actual={"requests": {"cpu": "3"}, "limits": {"cpu": "7"}},
            ),
            {"cpu": "6"},
            id="go: falls back to container status aggregation when PLR vertical scaling "
            "enabled but podAllocatedResources is nil",
        ),
        pytest.param(
            pod(
                [ctr("c1", cpu="1")],
                statuses=[cst("c1", allocated={"cpu": "6"}, actual={"cpu": "5"})],
                pod_allocated={"cpu": "6"},
            ),
            {"cpu": "6"},
            id="go: falls back to container status aggregation when PLR vertical scaling "
            "enabled but podResources is nil",
        ),
        # go: TestPodRequestsAndLimitsVerticalScalingWrappers
        pytest.param(
            pod(
                [ctr("c1", cpu="1")],
                pod_level={"cpu": "2"},
                pod_allocated={"cpu": "3"},
                pod_actual={"requests": {"cpu": "3.5"}, "limits": {"cpu": "5"}},
            ),
            {"cpu": "3.5"},
            id="go: pod level requests/limits with PLR vertical scaling enabled and status "
            "populated",
        ),
        pytest.param(
            pod(
                [ctr("c1", cpu="1")],
                pod_level={"cpu": "10"},
                resize="Infeasible",
                pod_allocated={"cpu": "3"},
                pod_actual={"requests": {"cpu": "4"}, "limits": {"cpu": "8"}},
            ),
            {"cpu": "4"},
            id="go: pod level requests/limits with PLR vertical scaling enabled and infeasible "
            "resize",
        ),
        pytest.param(
            pod(
                [ctr("c1")],
                statuses=[{"name": "c1", "resources": {"limits": {"cpu": "6"}}}],
                resize="Infeasible",
            ),
            {},
            id="go: container limits aggregation with infeasible resize",
        ),
        # Beyond the Go cases.
        pytest.param(
            pod([ctr(cpu="10m")], pod_level={"cpu": "1500m"}),
            {"cpu": "1500m"},
            id="pod-level cpu replaces the container sum",
        ),
        pytest.param(
            pod([ctr(cpu="10m")], pod_level={"cpu": "1"}, overhead={"cpu": "250m"}),
            {"cpu": "1250m"},
            id="overhead is added on top of pod-level requests",
        ),
        pytest.param(
            pod(
                [ctr(cpu="10m", **{"example.com/gpu": "1"})],
                pod_level={"cpu": "1", "example.com/gpu": "4"},
            ),
            {"cpu": "1", "example.com/gpu": "1"},
            id="pod-level extended resources are ignored",
        ),
        pytest.param(
            pod([ctr("c", cpu="4")], statuses=[cst("c", actual={"cpu": "2"})], resize="Deferred"),
            {"cpu": "4"},
            id="a deferred resize still counts the spec",
        ),
        pytest.param(
            pod(
                [ctr("c", cpu="1")],
                pod_level={"memory": "1Gi"},
                resize="Infeasible",
                pod_allocated={"memory": "512Mi", "cpu": "1"},
                pod_actual={"requests": {"memory": "256Mi"}},
            ),
            {"cpu": "1", "memory": "512Mi"},
            id="infeasible pod-level resize counts what is allocated, not the spec",
        ),
    ],
)
def test_pod_requests(body: dict[str, Any], expected: dict[str, str]) -> None:
    assert pod_requests(body) == resource_list(expected)


@pytest.mark.parametrize(
    ("name", "scalar"),
    [
        ("example.com/gpu", True),
        ("hugepages-2Mi", True),
        ("attachable-volumes-aws-ebs", True),
        ("kubernetes.io/batch", True),
        ("cpu", False),
        ("storage", False),
        ("requests.example.com/gpu", False),
        ("Example.com/gpu", False),
        ("a/b/c", False),
        ("example.com/-gpu", False),
    ],
)
def test_scalar_resource_names(name: str, scalar: bool) -> None:
    assert is_scalar_resource_name(name) is scalar


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            pod([ctr(cpu="0.5m"), ctr(cpu="0.5m")]),
            {"cpu": 1},
            id="quantities are summed exactly, then rounded up once",
        ),
        pytest.param(
            pod([ctr(memory="1.5", ephemeral_storage="1k", storage="1")]),
            {"memory": 2, "ephemeral-storage": 1000},
            id="memory rounds up; names Resource.Add does not know are dropped",
        ),
        pytest.param(
            pod([ctr(**{"example.com/gpu": "2", "vendor-gpu": "1"})]),
            {"example.com/gpu": 2},
            id="an extended resource counts, an unprefixed unknown name does not",
        ),
    ],
)
def test_pod_resource(body: dict[str, Any], expected: dict[str, int]) -> None:
    assert pod_resource(body) == expected


# -- the overbooking rule ----------------------------------------------------------------


def node(name: str, cpu: str = "2", memory: str = "4Gi", pods: int = 110) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def placed(
    name: str,
    on: str,
    *,
    scheduler: bool,
    phase: str = "Running",
    pod_level: dict[str, str] | None = None,
    **requests: str,
) -> dict[str, Any]:
    body = pod([ctr(**requests)], pod_level=pod_level)
    body["metadata"]["name"] = name
    body["spec"]["nodeName"] = on
    body["status"]["phase"] = phase
    if scheduler:
        body["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    return body


@pytest.mark.parametrize(
    ("nodes", "pods", "expected"),
    [
        pytest.param(
            [node("n")],
            [placed("a", "n", scheduler=True, cpu="1"), placed("b", "n", scheduler=False, cpu="1")],
            [],
            id="exactly full fits",
        ),
        pytest.param(
            [node("n")],
            [
                placed("pre", "n", scheduler=False, cpu="10m", pod_level={"cpu": "1500m"}),
                placed("in", "n", scheduler=True, cpu="1"),
            ],
            [Overbooking("n", "cpu", 2500, 2000, ("ns/in",), 1500)],
            id="scheduler placed a pod past a pod-level request",
        ),
        pytest.param(
            [node("n")],
            [
                placed("a", "n", scheduler=False, cpu="3"),
                placed("b", "n", scheduler=False, cpu="1"),
            ],
            [],
            id="the test overbooked with spec.nodeName only",
        ),
        pytest.param(
            [node("n")],
            [
                placed("pre", "n", scheduler=False, cpu="3"),
                placed("in", "n", scheduler=True, cpu="1m"),
            ],
            [Overbooking("n", "cpu", 3001, 2000, ("ns/in",), 3000)],
            id="nothing asking for cpu may join a node already over on cpu",
        ),
        pytest.param(
            [node("n")],
            [
                placed("pre", "n", scheduler=False, memory="5Gi"),
                placed("in", "n", scheduler=True, cpu="1"),
            ],
            [],
            id="a pod asking no memory may join a node over on memory",
        ),
        pytest.param(
            [node("n", pods=1)],
            [placed("pre", "n", scheduler=False), placed("in", "n", scheduler=True)],
            [Overbooking("n", "pods", 2, 1, ("ns/in",), 1)],
            id="too many pods",
        ),
        pytest.param(
            [node("n")],
            [
                placed("done", "n", scheduler=True, phase="Succeeded", cpu="2"),
                placed("failed", "n", scheduler=True, phase="Failed", cpu="2"),
                placed("in", "n", scheduler=True, cpu="2"),
            ],
            [],
            id="terminal pods free their node",
        ),
        pytest.param(
            [node("n")],
            [placed("in", "gone", scheduler=True, cpu="64")],
            [],
            id="pods on a node that does not exist are nobody's overbooking",
        ),
        pytest.param(
            [node("n", cpu="1")],
            [placed("a", "n", scheduler=True, cpu="1"), placed("b", "n", scheduler=True, cpu="1")],
            [Overbooking("n", "cpu", 2000, 1000, ("ns/a", "ns/b"), 0)],
            id="two scheduler-bound pods",
        ),
    ],
)
def test_overbookings(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], expected: list[Overbooking]
) -> None:
    assert overbookings(nodes, pods) == expected


def test_a_pod_being_deleted_still_counts() -> None:
    deleting = placed("old", "n", scheduler=False, cpu="2")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    found = overbookings([node("n")], [deleting, placed("in", "n", scheduler=True, cpu="1")])
    assert [str(o) for o in found] == [
        "node n: cpu requested 3000 > allocatable 2000 (2000 of it from pods created with "
        "spec.nodeName); placed there by a scheduler: ns/in"
    ]


def test_extended_resources_a_claim_serves_are_not_counted_against_allocatable() -> None:
    served = placed("dra", "n", scheduler=True, **{"example.com/gpu": "1"})
    mapping = {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "r"}
    served["status"]["extendedResourceClaimStatus"] = {
        "requestMappings": [mapping],
        "resourceClaimName": "dra-extended-resources-abcde",
    }
    plugin = placed("plugin", "n", scheduler=True, **{"example.com/gpu": "1"})
    found = overbookings([node("n")], [served, plugin])
    assert [(o.resource, o.requested, o.scheduler_bound) for o in found] == [
        ("example.com/gpu", 1, ("ns/plugin",))
    ]
