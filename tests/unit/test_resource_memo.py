"""The kept request model: a pod whose inputs were seen before gets the same model, and
a change to any field the model reads gives that pod's own model, never a kept one."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from podium.kube import resource_memo
from podium.kube.objects import parse_pod
from podium.kube.resource_memo import kept_pod_resources
from podium.kube.resources import pod_resources

Pod = dict[str, Any]


def base() -> Pod:
    both = {"cpu": "100m", "memory": "64Mi"}
    return {
        "spec": {
            "containers": [
                {"name": "app", "image": "x", "resources": {"requests": both, "limits": both}}
            ],
            "initContainers": [
                {"name": "init", "image": "x", "resources": {"requests": both, "limits": both}}
            ],
        },
        "status": {
            "containerStatuses": [{"name": "app", "allocatedResources": {"cpu": "150m"}}],
        },
    }


def _set(path: str, value: Any) -> Callable[[Pod], None]:
    """An edit that sets the field at a dotted path (list positions as numbers)."""

    def edit(pod: Pod) -> None:
        *parents, last = path.split(".")
        node: Any = pod
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if isinstance(node, list):
            node[int(last) : int(last) + 1] = [value]
        else:
            node[last] = copy.deepcopy(value)

    return edit


def _none(pod: Pod) -> None:
    pass


BAD = _set("spec.containers.0.resources.requests.memory", "lots")
POD_LEVEL = _set("spec.resources", {"requests": {"cpu": "1"}})


def _both(*edits: Callable[[Pod], None]) -> Callable[[Pod], None]:
    def edit(pod: Pod) -> None:
        for one in edits:
            one(pod)

    return edit


ACTUATED = {"requests": {"cpu": "3"}}
INIT_STATUS = [{"name": "init", "allocatedResources": {"cpu": "4"}}]
INFEASIBLE = [{"type": "PodResizePending", "reason": "Infeasible"}]
STATUS_LEVEL = _both(POD_LEVEL, _set("status.resources", {"requests": {"cpu": "1"}}))

# (id, what both pods have, the edit, bound): each edit changes what pod_resources
# answers. A container's name shows only in a problem's wording, so that row's pods
# carry a quantity that does not parse; pod-level status counts only beside pod-level
# requests.
CHANGES: list[tuple[str, Callable[[Pod], None], Callable[[Pod], None], bool]] = [
    ("container request", _none, _set("spec.containers.0.resources.requests.cpu", "2"), False),
    ("container limit (QoS)", _none, _set("spec.containers.0.resources.limits.cpu", "1"), False),
    ("container name (problem)", BAD, _set("spec.containers.0.name", "other"), False),
    ("second container", _none, _set("spec.containers.1", {"name": "b"}), False),
    ("init request", _none, _set("spec.initContainers.0.resources.requests.cpu", "3"), False),
    ("init made a sidecar", _none, _set("spec.initContainers.0.restartPolicy", "Always"), False),
    ("pod-level requests", _none, POD_LEVEL, False),
    ("overhead", _none, _set("spec.overhead", {"cpu": "250m"}), False),
    ("allocated", _none, _set("status.containerStatuses.0.allocatedResources.cpu", "3"), True),
    ("actuated", _none, _set("status.containerStatuses.0.resources", ACTUATED), True),
    ("init status", _none, _set("status.initContainerStatuses", INIT_STATUS), True),
    ("pod-level status", POD_LEVEL, _set("status.resources", {"requests": {"cpu": "5"}}), True),
    ("pod-level allocated", STATUS_LEVEL, _set("status.allocatedResources", {"cpu": "5"}), True),
    ("stored QoS class", _none, _set("status.qosClass", "BestEffort"), False),
    ("infeasible resize", _none, _set("status.conditions", INFEASIBLE), True),
]  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh() -> None:
    resource_memo._kept.clear()


def _model(pod: Pod, bound: bool) -> Any:
    return pod_resources(pod["spec"], pod["status"], bound)


def _kept(pod: Pod, bound: bool) -> Any:
    return kept_pod_resources(pod["spec"], pod["status"], bound)


@pytest.mark.parametrize(
    ("prepare", "edit", "bound"), [row[1:] for row in CHANGES], ids=[row[0] for row in CHANGES]
)
def test_a_change_the_model_reads_is_never_answered_from_a_kept_model(
    prepare: Callable[[Pod], None], edit: Callable[[Pod], None], bound: bool
) -> None:
    first = base()
    prepare(first)
    changed = copy.deepcopy(first)
    edit(changed)
    kept = _kept(first, bound)
    assert kept == _model(first, bound)
    expected = _model(changed, bound)
    assert expected != kept, "the row must change the model"
    assert _kept(changed, bound) == expected


def test_binding_reads_the_status_afresh() -> None:
    pod = base()
    pending, bound = _kept(pod, False), _kept(pod, True)
    assert (pending.requests["cpu"], bound.requests["cpu"]) == (100, 150)
    assert bound == _model(pod, True)


def test_equal_inputs_share_one_model_whatever_else_differs() -> None:
    first, second = base(), base()
    second["spec"]["containers"][0]["image"] = "y"
    second["spec"]["tolerations"] = [{"operator": "Exists"}]
    second["status"]["phase"] = "Running"
    second["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    model = kept_pod_resources(first["spec"], first["status"], True)
    assert model == _model(first, True)
    assert kept_pod_resources(second["spec"], second["status"], True) is model


def test_the_oldest_inputs_are_dropped_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resource_memo, "KEPT_MODELS", 2)
    pods = [base() for _ in range(3)]
    for i, pod in enumerate(pods):
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{i + 1}"
        kept_pod_resources(pod["spec"], pod["status"], False)
    assert len(resource_memo._kept) == 2
    first = kept_pod_resources(pods[0]["spec"], pods[0]["status"], False)
    assert first == _model(pods[0], False)
    assert first.requests["cpu"] == 1000


def test_parsed_pods_carry_the_kept_model() -> None:
    body = {"metadata": {"uid": "u", "name": "p", "namespace": "n"}, **base()}
    one, two = parse_pod(body), parse_pod(copy.deepcopy(body))
    assert one.requests == two.requests == {"cpu": 100, "memory": 64 * 2**20}
    assert one.requests is two.requests
