"""The request model against the cases of component-helpers v0.37.2 (resource/helpers_test.go).

Each row is a pod spec (and status), whether the pod is bound, and the
requests kube-scheduler counts for it. Rows named after a Go test case carry
that case's numbers.
"""

from __future__ import annotations

from typing import Any

import pytest

from podium.kube.objects import parse_pod
from podium.kube.resource_names import is_extended_resource, is_scalar_resource
from podium.kube.resources import pod_resources, request_sources, requests_decreased

MI = 2**20


def c(name: str, restart: str = "", **requests: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "x"}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    if restart:
        container["restartPolicy"] = restart
    return container


def status_of(
    name: str, allocated: dict[str, str] | None = None, actual: dict[str, str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if allocated is not None:
        out["allocatedResources"] = allocated
    if actual is not None:
        out["resources"] = {"requests": actual}
    return out


INFEASIBLE = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
DEFERRED = [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}]

# (id, spec, status, bound, expected requests)
REQUEST_CASES: list[tuple[str, dict[str, Any], dict[str, Any], bool, dict[str, int]]] = [
    (
        "nil options, larger init container",
        {"containers": [c("a", cpu="1")], "initContainers": [c("i", cpu="2")]},
        {},
        False,
        {"cpu": 2000},
    ),
    (
        "nil options, larger containers",
        {"containers": [c("a", cpu="1"), c("b", cpu="2")], "initContainers": [c("i", cpu="2")]},
        {},
        False,
        {"cpu": 3000},
    ),
    (
        "pod overhead included",
        {
            "containers": [c("a", cpu="1", memory="1Mi")],
            "overhead": {"cpu": "500m", "memory": "1Mi"},
        },
        {},
        False,
        {"cpu": 1500, "memory": 2 * MI},
    ),
    (
        "resized, infeasible",
        {"containers": [c("container-1", cpu="4")]},
        {
            "conditions": INFEASIBLE,
            "containerStatuses": [status_of("container-1", actual={"cpu": "2"})],
        },
        True,
        {"cpu": 2000},
    ),
    (
        "resized, infeasible & in-progress",
        {"containers": [c("container-1", cpu="6")]},
        {
            "conditions": INFEASIBLE,
            "containerStatuses": [status_of("container-1", {"cpu": "4"}, {"cpu": "2"})],
        },
        True,
        {"cpu": 4000},
    ),
    (
        "resized, no resize status",
        {"containers": [c("container-1", cpu="4")]},
        {"containerStatuses": [status_of("container-1", actual={"cpu": "2"})]},
        True,
        {"cpu": 4000},
    ),
    (
        "resized: per-resource 3-way maximum",
        {"containers": [c("container-1", cpu="30m", memory="20M", **{"ephemeral-storage": "10G"})]},
        {
            "containerStatuses": [
                status_of(
                    "container-1",
                    {"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
                    {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                )
            ]
        },
        True,
        {"cpu": 30, "memory": 30 * 10**6, "ephemeral-storage": 30 * 10**9},
    ),
    (
        "resized, infeasible, but don't use status (the pod being scheduled)",
        {"containers": [c("container-1", cpu="4")]},
        {
            "conditions": INFEASIBLE,
            "containerStatuses": [status_of("container-1", actual={"cpu": "2"})],
        },
        False,
        {"cpu": 4000},
    ),
    (
        "resized, restartable init container, infeasible",
        {"initContainers": [c("s", "Always", cpu="4")], "containers": [c("a")]},
        {
            "conditions": INFEASIBLE,
            "initContainerStatuses": [status_of("s", actual={"cpu": "2"})],
        },
        True,
        {"cpu": 2000},
    ),
    (
        "resize deferred counts the larger of spec and allocated",
        {"containers": [c("a", cpu="3")]},
        {"conditions": DEFERRED, "containerStatuses": [status_of("a", {"cpu": "1"}, {"cpu": "1"})]},
        True,
        {"cpu": 3000},
    ),
    (
        "restartable-init, init and regular",
        {
            "initContainers": [c("s", "Always", cpu="1"), c("i", cpu="5")],
            "containers": [c("a", cpu="2")],
        },
        {},
        False,
        {"cpu": 6000},
    ),
    (
        "aggregate request resolves max of sums instead of sum of maxes",
        {
            "initContainers": [
                c("s1", "Always", cpu="1"),
                c("i", cpu="3"),
                c("s2", "Always", cpu="1"),
            ],
            "containers": [c("a", cpu="1")],
        },
        {},
        False,
        {"cpu": 4000},
    ),
    (
        "pod level memory and container level cpu",
        {
            "resources": {"requests": {"memory": "15Mi"}},
            "containers": [c("a", cpu="2m", memory="1Mi")],
        },
        {},
        False,
        {"cpu": 2, "memory": 15 * MI},
    ),
    (
        "pod-level resources, container-level resources, init and sidecar container",
        {
            "resources": {"requests": {"memory": "15Mi", "cpu": "18m"}},
            "containers": [c("a", memory="3Mi", cpu="2m")],
            "initContainers": [
                c("s", "Always", memory="5Mi", cpu="4m"),
                c("i", memory="6Mi", cpu="8m"),
            ],
        },
        {},
        False,
        {"cpu": 18, "memory": 15 * MI},
    ),
    (
        "pod level unsupported resources set at pod-level only",
        {
            "resources": {"requests": {"ephemeral-storage": "1Gi"}},
            "containers": [c("a", cpu="1", **{"ephemeral-storage": "1Mi"})],
        },
        {},
        False,
        {"cpu": 1000, "ephemeral-storage": MI},
    ),
    (
        "pod-level hugepages replace the container sum",
        {
            "resources": {"requests": {"memory": "10Mi", "hugepages-2Mi": "4Mi"}},
            "containers": [c("a", memory="1Mi", **{"hugepages-2Mi": "2Mi"})],
        },
        {},
        False,
        {"memory": 10 * MI, "hugepages-2Mi": 4 * MI},
    ),
    (
        "extended resources stay at container level with pod-level requests",
        {
            "resources": {"requests": {"cpu": "2"}},
            "containers": [c("a", cpu="1", **{"example.com/gpu": "1"}), c("b", cpu="1")],
        },
        {},
        False,
        {"cpu": 2000, "example.com/gpu": 1},
    ),
    (
        "pod-level status: the largest of spec, actuated and allocated",
        {"resources": {"requests": {"cpu": "1"}}, "containers": [c("a", cpu="1")]},
        {"resources": {"requests": {"cpu": "2"}}, "allocatedResources": {"cpu": "1500m"}},
        True,
        {"cpu": 2000},
    ),
    (
        "pod-level status, infeasible: spec does not count",
        {"resources": {"requests": {"cpu": "3"}}, "containers": [c("a", cpu="1")]},
        {
            "conditions": INFEASIBLE,
            "resources": {"requests": {"cpu": "2"}},
            "allocatedResources": {"cpu": "1500m"},
        },
        True,
        {"cpu": 2000},
    ),
    (
        "pod-level status is ignored for the pod being scheduled",
        {"resources": {"requests": {"cpu": "1"}}, "containers": [c("a", cpu="1")]},
        {"resources": {"requests": {"cpu": "2"}}, "allocatedResources": {"cpu": "2"}},
        False,
        {"cpu": 1000},
    ),
    (
        "pods is not a counted request",
        {"containers": [c("a", cpu="1", pods="1")]},
        {},
        False,
        {"cpu": 1000},
    ),
]


@pytest.mark.parametrize(
    ("spec", "status", "bound", "expected"),
    [case[1:] for case in REQUEST_CASES],
    ids=[case[0] for case in REQUEST_CASES],
)
def test_requests(
    spec: dict[str, Any], status: dict[str, Any], bound: bool, expected: dict[str, int]
) -> None:
    result = pod_resources(spec, status, bound)
    assert result.requests == expected
    assert result.problems == []


# (id, spec, nonzero cpu, nonzero memory, score cpu, score memory). The node counts
# pod-level requests (CalculateResource); NodeResourcesFit's score counts the pod
# being scheduled by its containers alone (Fit's calculatePodResourceRequest).
NONZERO_CASES: list[tuple[str, dict[str, Any], int, int, int, int]] = [
    ("no requests: both defaults", {"containers": [c("a")]}, 100, 200 * MI, 100, 200 * MI),
    (
        "defaults per container",
        {"containers": [c("a", cpu="1"), c("b")]},
        1100,
        400 * MI,
        1100,
        400 * MI,
    ),
    ("an explicit zero is kept", {"containers": [c("a", cpu="0")]}, 0, 200 * MI, 0, 200 * MI),
    (
        "pod-level cpu: no cpu default, memory default fills the gap",
        {"resources": {"requests": {"cpu": "1"}}, "containers": [c("a"), c("b")]},
        1000,
        400 * MI,
        200,
        400 * MI,
    ),
    (
        # The node counts the container cpu as it is (cpu is present); the score
        # fills the missing container's default and never reads pod level.
        "pod-level memory, cpu on one container only",
        {
            "resources": {"requests": {"memory": "1Gi"}},
            "containers": [c("a", cpu="500m"), c("b")],
        },
        500,
        1024 * MI,
        600,
        400 * MI,
    ),
    (
        "pod-level cpu and memory (as the API server fills them), no container requests",
        {"resources": {"requests": {"cpu": "900m", "memory": "6Gi"}}, "containers": [c("a")]},
        900,
        6144 * MI,
        100,
        200 * MI,
    ),
]


@pytest.mark.parametrize(
    ("spec", "nonzero_cpu", "nonzero_memory", "score_cpu", "score_memory"),
    [case[1:] for case in NONZERO_CASES],
    ids=[case[0] for case in NONZERO_CASES],
)
def test_nonzero_requests(
    spec: dict[str, Any], nonzero_cpu: int, nonzero_memory: int, score_cpu: int, score_memory: int
) -> None:
    result = pod_resources(spec, {}, False)
    assert (result.nonzero_cpu, result.nonzero_memory) == (nonzero_cpu, nonzero_memory)
    assert (result.score_cpu, result.score_memory) == (score_cpu, score_memory)


# (id, spec, status, bound, score cpu, score memory, score_requests)
SCORE_CASES: list[
    tuple[str, dict[str, Any], dict[str, Any], bool, int, int, dict[str, int] | None]
] = [
    (
        "no pod-level requests: no separate view",
        {"containers": [c("a", cpu="1")]},
        {},
        False,
        1000,
        200 * MI,
        None,
    ),
    (
        "pod level with hugepages: the containers' hugepages, not the pod's",
        {
            "resources": {"requests": {"cpu": "2", "memory": "1Gi", "hugepages-2Mi": "8Mi"}},
            "containers": [c("a", cpu="1", **{"hugepages-2Mi": "2Mi"}), c("b")],
        },
        {},
        False,
        1100,
        400 * MI,
        {"cpu": 1100, "memory": 400 * MI, "hugepages-2Mi": 2 * MI},
    ),
    (
        "pod level: init containers at their peak, sidecars beside, overhead on top",
        {
            "resources": {"requests": {"cpu": "3", "memory": "3Gi"}},
            "initContainers": [c("init", cpu="2"), c("side", "Always", memory="1Gi")],
            "containers": [c("a")],
            "overhead": {"cpu": "250m"},
        },
        {},
        False,
        2250,
        1224 * MI,
        {"cpu": 2250, "memory": 1224 * MI},
    ),
    (
        "a pending pod's resize status is not read",
        {"containers": [c("a", cpu="1")]},
        {"containerStatuses": [status_of("a", {"cpu": "3"}, {"cpu": "3"})]},
        False,
        1000,
        200 * MI,
        None,
    ),
    (
        "nor a bound pod's",
        {"containers": [c("a", cpu="1")]},
        {"containerStatuses": [status_of("a", {"cpu": "3"}, {"cpu": "3"})]},
        True,
        1000,
        200 * MI,
        None,
    ),
]


@pytest.mark.parametrize(
    ("spec", "status", "bound", "score_cpu", "score_memory", "score_requests"),
    [case[1:] for case in SCORE_CASES],
    ids=[case[0] for case in SCORE_CASES],
)
def test_fit_score_view(
    spec: dict[str, Any],
    status: dict[str, Any],
    bound: bool,
    score_cpu: int,
    score_memory: int,
    score_requests: dict[str, int] | None,
) -> None:
    """NodeResourcesFit's score: containers, defaults and overhead; no pod level, no status."""
    result = pod_resources(spec, status, bound)
    assert (result.score_cpu, result.score_memory) == (score_cpu, score_memory)
    assert result.score_requests == score_requests


def limits(container: dict[str, Any], **values: str) -> dict[str, Any]:
    container.setdefault("resources", {})["limits"] = dict(values)
    return container


QOS_CASES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("no requests", {"containers": [c("a")]}, {}, "BestEffort"),
    ("requests only", {"containers": [c("a", cpu="1")]}, {}, "Burstable"),
    (
        "requests equal limits",
        {"containers": [limits(c("a", cpu="1", memory="1Gi"), cpu="1", memory="1Gi")]},
        {},
        "Guaranteed",
    ),
    (
        "pod-level requests only are Burstable",
        {"resources": {"requests": {"cpu": "1"}}, "containers": [c("a")]},
        {},
        "Burstable",
    ),
    (
        "pod-level requests equal limits are Guaranteed",
        {
            "resources": {
                "requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
            "containers": [c("a")],
        },
        {},
        "Guaranteed",
    ),
    (
        "the API server's class wins",
        {"containers": [c("a")]},
        {"qosClass": "Burstable"},
        "Burstable",
    ),
]


@pytest.mark.parametrize(
    ("spec", "status", "qos"), [case[1:] for case in QOS_CASES], ids=[case[0] for case in QOS_CASES]
)
def test_qos(spec: dict[str, Any], status: dict[str, Any], qos: str) -> None:
    assert pod_resources(spec, status, False).qos == qos


def test_sources_say_where_each_request_came_from() -> None:
    spec = {
        "resources": {"requests": {"cpu": "1"}},
        "containers": [c("a", cpu="100m", memory="1Gi")],
        "overhead": {"memory": "10Mi"},
    }
    status = {"containerStatuses": [status_of("a", {"memory": "2Gi"}, {"memory": "2Gi"})]}
    sources = request_sources(spec, status, True)
    assert sources == {"cpu": "pod level", "memory": "resize status + overhead"}
    assert request_sources(spec, {}, False)["memory"] == "containers + overhead"


@pytest.mark.parametrize(
    ("spec", "status", "fragment"),
    [
        ({"containers": [c("a", cpu="-1")]}, {}, "containers[a].requests.cpu: negative"),
        ({"containers": [c("a", cpu="lots")]}, {}, "containers[a].requests.cpu: invalid"),
        ({"resources": {"requests": {"memory": "1Xi"}}, "containers": [c("a")]}, {}, "resources"),
        (
            {"containers": [c("a", cpu="1")]},
            {"containerStatuses": [status_of("a", {"cpu": "much"})]},
            "status[a].allocatedResources.cpu",
        ),
        (
            {"containers": [c("a")]},
            {"allocatedResources": {"cpu": []}},
            "status.allocatedResources",
        ),
    ],
)
def test_bad_quantities_are_reported_not_raised(
    spec: dict[str, Any], status: dict[str, Any], fragment: str
) -> None:
    result = pod_resources(spec, status, True)
    assert any(fragment in problem for problem in result.problems), result.problems
    pod = parse_pod({"metadata": {"name": "p", "uid": "u"}, "spec": spec, "status": status})
    assert fragment in pod.problem


def test_parse_pod_reads_status_only_once_bound() -> None:
    spec = {"containers": [c("a", cpu="1")]}
    status = {"containerStatuses": [status_of("a", {"cpu": "3"}, {"cpu": "3"})]}
    pending = parse_pod({"metadata": {"name": "p", "uid": "u"}, "spec": spec, "status": status})
    bound = parse_pod(
        {"metadata": {"name": "p", "uid": "u"}, "spec": {**spec, "nodeName": "n"}, "status": status}
    )
    assert pending.requests == {"cpu": 1000}
    assert bound.requests == {"cpu": 3000}


@pytest.mark.parametrize(
    ("old", "new", "decreased"),
    [
        ({"cpu": 1000}, {"cpu": 500}, True),
        ({"cpu": 1000, "memory": 5}, {"cpu": 1000}, True),
        ({"cpu": 1000}, {"cpu": 1000, "memory": 5}, False),
        ({"cpu": 500}, {"cpu": 1000}, False),
    ],
)
def test_requests_decreased(old: dict[str, int], new: dict[str, int], decreased: bool) -> None:
    assert requests_decreased(old, new) is decreased


@pytest.mark.parametrize(
    ("name", "extended", "scalar"),
    [
        ("cpu", False, False),
        ("pods", False, False),
        ("example.com/gpu", True, True),
        ("kubernetes.io/foo", False, True),
        ("foo.kubernetes.io/bar", False, True),
        ("requests.example.com/gpu", False, False),
        ("hugepages-2Mi", False, True),
        ("attachable-volumes-csi-x", False, True),
        ("bad name/", False, False),
    ],
)
def test_resource_name_classes(name: str, extended: bool, scalar: bool) -> None:
    assert is_extended_resource(name) is extended
    assert is_scalar_resource(name) is scalar
