"""DynamicResources' binding conditions and timeouts: Go's isClaimReadyForBinding and
isClaimTimeout, PreFilter's view of a claim whose binding failed or timed out (no node
can use it; PostFilter frees it), the plugin's arguments as ValidateDynamicResourcesArgs
checks them, and the Filter's allocation deadline (DRASchedulerFilterTimeout)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from podium.algorithms.dynamic_resources.allocator import AllocationTimeout, Allocator
from podium.algorithms.dynamic_resources.plugin import (
    NOT_AVAILABLE,
    DynamicResources,
    binding_ready,
    binding_timed_out,
    stale_claim,
)
from podium.framework.plugin import Cycle, PluginError
from podium.kube.manifests import make_node, make_pod
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.policy import PolicyError, build_profile
from podium.state.devices import AllocatedState
from podium.state.dra import parse_claim
from podium.state.snapshot import build_snapshot
from tests.unit.dra.builders import claim, class_, node, request, slice_with_multiple_devices

NOW = 1_800_000_000.0
STAMP = "2027-01-15T08:00:00Z"  # 1_800_000_000 s after the epoch
OLD = "2020-01-01T00:00:00Z"
DEVICE = {"driver": "d", "pool": "p", "device": "gpu-0"}


def _claim(
    results: list[dict[str, Any]] | None,
    devices: list[dict[str, Any]] | None = None,
    stamp: str = STAMP,
    reserved: tuple[str, ...] = (),
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": "c", "namespace": "ns", "uid": "cu", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu"}]}},
        "status": {},
    }
    if results is not None:
        body["status"]["allocation"] = {
            "devices": {"results": results},
            **({"allocationTimestamp": stamp} if stamp else {}),
        }
    if devices is not None:
        body["status"]["devices"] = devices
    if reserved:
        body["status"]["reservedFor"] = [{"resource": "pods", "uid": u} for u in reserved]
    return body


def _result(conditions: list[str] | None = None, failures: list[str] | None = None) -> Any:
    out: dict[str, Any] = {"request": "gpu", **DEVICE}
    if conditions is not None:
        out["bindingConditions"] = conditions
    if failures is not None:
        out["bindingFailureConditions"] = failures
    return out


def _status(device: dict[str, str] = DEVICE, **conditions: str) -> dict[str, Any]:
    return {
        **device,
        "conditions": [
            {"type": t, "status": v, "reason": "Why", "message": 'said "no"'}
            for t, v in conditions.items()
        ],
    }


@pytest.mark.parametrize(
    ("body", "ready"),
    [
        pytest.param(_claim(None), False, id="unallocated"),
        pytest.param(_claim([_result()]), True, id="no-binding-conditions"),
        pytest.param(_claim([_result(["A"])]), False, id="no-device-status-yet"),
        pytest.param(
            _claim([_result(["A"])], [_status({**DEVICE, "device": "gpu-1"}, A="True")]),
            False,
            id="status-of-another-device",
        ),
        pytest.param(_claim([_result(["A"])], [_status(A="False")]), False, id="condition-false"),
        pytest.param(_claim([_result(["A", "B"])], [_status(A="True")]), False, id="one-of-two"),
        pytest.param(
            _claim([_result(["A", "B"])], [_status(A="True", B="True")]), True, id="all-true"
        ),
        pytest.param(
            _claim([_result(["A"], ["F"])], [_status(A="True", F="True")]),
            'device binding failed: claim=c, reason=Why, message="said \\"no\\""',
            id="failure-condition-wins",
        ),
        pytest.param(
            _claim([_result(["A"], ["F"])], [_status(A="True", F="False")]),
            True,
            id="failure-condition-false",
        ),
        pytest.param(
            _claim([_result([], ["F"])], [_status(F="True")]),
            True,
            id="failure-without-binding-conditions-is-not-read",
        ),
    ],
)
def test_binding_ready(body: dict[str, Any], ready: bool | str) -> None:
    assert binding_ready(parse_claim(body)) == ready


@pytest.mark.parametrize(
    ("body", "timeout", "timed_out"),
    [
        pytest.param(_claim(None), 1.0, False, id="unallocated"),
        pytest.param(_claim([_result(["A"])], stamp=""), 1.0, False, id="no-timestamp"),
        pytest.param(_claim([_result()]), 1.0, False, id="no-binding-conditions"),
        pytest.param(_claim([_result(["A"])]), 1.0, False, id="timeout-reached-not-passed"),
        pytest.param(_claim([_result(["A"])]), 0.5, True, id="passed"),
        pytest.param(_claim([_result([])]), 0.5, True, id="empty-list-is-not-nil"),
    ],
)
def test_binding_timed_out(body: dict[str, Any], timeout: float, timed_out: bool) -> None:
    assert binding_timed_out(parse_claim(body), timeout, NOW + 1.0) is timed_out


def _pod() -> PodInfo:
    body = make_pod("p")
    body["metadata"].update(namespace="ns", uid="pod-uid")
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    return parse_pod(body)


@pytest.mark.parametrize(
    ("devices", "stamp", "reserved", "available", "stale"),
    [
        pytest.param([_status(A="True")], OLD, (), True, False, id="met"),
        pytest.param([], "2999-01-01T00:00:00Z", (), True, False, id="pending-within-timeout"),
        pytest.param([], OLD, (), False, True, id="pending-past-timeout"),
        pytest.param([_status(F="True")], "2999-01-01T00:00:00Z", (), False, True, id="failed"),
        pytest.param([_status(F="True")], OLD, ("pod-uid",), False, True, id="failed-own"),
        pytest.param([_status(F="True")], OLD, ("other",), False, False, id="failed-in-use"),
    ],
)
def test_pre_filter_makes_an_unbindable_claim_unavailable_everywhere(
    devices: list[dict[str, Any]],
    stamp: str,
    reserved: tuple[str, ...],
    available: bool,
    stale: bool,
) -> None:
    """Filter's unavailableClaims for binding conditions, and PostFilter's choice."""
    body = _claim([_result(["A"], ["F"])], devices, stamp, reserved)
    _, snapshot = build_snapshot([parse_node(make_node(n)) for n in ("n1", "n2")], [])
    snapshot.dra.apply("resourceclaims", None, body)
    the_pod = _pod()
    cycle = Cycle(the_pod, snapshot)
    plugin = DynamicResources({"bindingTimeoutSeconds": 60})
    assert plugin.pre_filter(cycle) is None
    rejections = plugin.filter(cycle, np.arange(2))
    if available:
        assert rejections == []
    else:
        (rejection,) = rejections
        assert rejection.reason == NOT_AVAILABLE
        assert rejection.mask.tolist() == [True, True]
    found = stale_claim(plugin, snapshot.dra, the_pod)
    assert (found is not None) is stale


@pytest.mark.parametrize(
    ("args", "binding", "filter_", "error"),
    [
        pytest.param({}, 600.0, 10.0, "", id="defaults"),
        pytest.param(
            {"bindingTimeoutSeconds": 1, "filterTimeoutSeconds": 0}, 1.0, 0.0, "", id="least"
        ),
        pytest.param({"bindingTimeoutSeconds": 2.5}, 2.5, 10.0, "", id="fraction"),
        pytest.param(
            {"bindingTimeoutSeconds": 0.5},
            0,
            0,
            "bindingTimeoutSeconds: Invalid value: 0.5: must be at least 1 second",
            id="binding-below-one-second",
        ),
        pytest.param(
            {"filterTimeoutSeconds": -1},
            0,
            0,
            "filterTimeoutSeconds: Invalid value: -1: must be zero or positive",
            id="negative-filter",
        ),
        pytest.param(
            {"bindingTimeoutSeconds": "10m"},
            0,
            0,
            "bindingTimeoutSeconds must be a number of seconds, got '10m'",
            id="not-a-number",
        ),
        pytest.param(
            {"filterTimeoutSeconds": True},
            0,
            0,
            "filterTimeoutSeconds must be a number of seconds, got True",
            id="bool",
        ),
    ],
)
def test_arguments(args: dict[str, Any], binding: float, filter_: float, error: str) -> None:
    if error:
        with pytest.raises(ValueError, match="^" + error.replace("(", r"\(")):
            DynamicResources(args)
        with pytest.raises(PolicyError, match="must be"):
            build_profile({"pluginArgs": {"dynamicResources": args}})
        return
    plugin = DynamicResources(args)
    assert (plugin.binding_timeout, plugin.filter_timeout) == (binding, filter_)
    profile = build_profile({"pluginArgs": {"dynamicResources": args}})
    (built,) = [p for p in profile.filters if isinstance(p, DynamicResources)]
    assert built.binding_timeout == binding


CLAIM = {**claim("c", request("gpu", "class-a", 1)), "metadata": {"name": "c", "namespace": "ns"}}
SLICES = [slice_with_multiple_devices("s", "node-1", "pool-1", "driver-a", 4)]


@pytest.mark.parametrize(
    ("deadline", "allocated"),
    [
        pytest.param(None, True, id="no-deadline"),
        pytest.param(3600.0, True, id="deadline-ahead"),
        pytest.param(-1.0, False, id="deadline-passed"),
    ],
)
def test_allocator_stops_at_its_deadline(deadline: float | None, allocated: bool) -> None:
    allocator = Allocator(AllocatedState(), {"class-a": class_("class-a", "driver-a")}, SLICES)
    at = None if deadline is None else time.monotonic() + deadline
    target = node("node-1", "region-1")
    if allocated:
        assert allocator.allocate(target, [CLAIM], deadline=at) is not None
        return
    with pytest.raises(AllocationTimeout, match="filter operation aborted"):
        allocator.allocate(target, [CLAIM], deadline=at)


@pytest.mark.parametrize(
    ("timeout", "error"),
    [
        pytest.param(0.0, "", id="off"),
        pytest.param(3600.0, "", id="generous"),
        pytest.param(
            1e-9,
            'running "DynamicResources" filter plugin: node node-1: timed out trying to '
            "allocate devices",
            id="passed-before-the-search",
        ),
    ],
)
def test_filter_timeout_aborts_the_attempt_with_gos_message(timeout: float, error: str) -> None:
    node_body = make_node("node-1")
    _, snapshot = build_snapshot([parse_node(node_body)], [])
    store = snapshot.dra
    store.apply(
        "deviceclasses",
        None,
        {**class_("class-a", "driver-a"), "metadata": {"name": "class-a", "resourceVersion": "1"}},
    )
    for s in SLICES:
        store.apply(
            "resourceslices", None, {**s, "metadata": {"name": "s", "resourceVersion": "1"}}
        )
    body = {
        **CLAIM,
        "metadata": {"name": "c", "namespace": "ns", "uid": "cu", "resourceVersion": "1"},
    }
    store.apply("resourceclaims", None, body)
    cycle = Cycle(_pod(), snapshot)
    plugin = DynamicResources({"filterTimeoutSeconds": timeout})
    assert plugin.pre_filter(cycle) is None
    if not error:
        assert plugin.filter(cycle, np.arange(1)) == []
        return
    with pytest.raises(PluginError) as raised:
        plugin.filter(cycle, np.arange(1))
    assert str(raised.value) == error
