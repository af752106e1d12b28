"""The Workload API is watched only where discovery shows it served."""

from __future__ import annotations

from typing import Any, cast

import kopf
import pytest

from podium.handlers import register_watches
from podium.kube.client import ApiError
from podium.policy import default_profile
from podium.scheduling.binder import Binder
from podium.scheduling.scheduler import PodiumScheduler
from podium.state.podgroups import WORKLOAD_API

GROUP_RESOURCES = {"resources": [{"name": "workloads"}, {"name": "podgroups"}]}


class _Client:
    def __init__(self, discovery: dict[str, Any] | None) -> None:
        self.discovery = discovery

    async def get(self, path: str) -> dict[str, Any]:
        if path == WORKLOAD_API and self.discovery is not None:
            return self.discovery
        raise ApiError(404, {"reason": "NotFound"})


@pytest.mark.parametrize(
    ("discovery", "served"),
    [
        (None, False),  # the group/version is not served (404)
        ({"resources": [{"name": "workloads"}]}, False),
        (GROUP_RESOURCES, True),
    ],
)
async def test_watches_follow_discovery(discovery: dict[str, Any] | None, served: bool) -> None:
    binder = cast(Binder, type("NoBinder", (), {"client": None, "instance": ""})())
    sched = PodiumScheduler(binder, {"podium": default_profile("podium")})
    await sched.discover(cast(Any, _Client(discovery)))
    assert sched.pod_groups.served is served
    registry = kopf.OperatorRegistry()
    register_watches(registry, sched)
    ids = {h.id for h in registry._watching.get_all_handlers()}
    workload = {"workloads_event", "podgroups_event"}
    assert (workload & ids) == (workload if served else set())
    assert "nodes_event" in ids  # pods come through a direct ListWatch


async def test_a_relist_forgets_a_pod_group_deleted_during_a_watch_gap() -> None:
    binder = cast(Binder, type("NoBinder", (), {"client": None, "instance": ""})())
    sched = PodiumScheduler(binder, {"podium": default_profile("podium")})
    await sched.discover(cast(Any, _Client(GROUP_RESOURCES)))
    assert {"workloads", "podgroups"} <= set(sched.resync.kinds)
    group = {
        "metadata": {"name": "g", "namespace": "ns", "resourceVersion": "3", "generation": 1},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }
    sched.on_pod_group("podgroups", "ADDED", group)
    assert sched.pod_groups.get("ns", "g") is not None
    gone = sched.resync.reconcile("podgroups", set(), "9")
    assert gone == ["ns/g"]
    assert sched.pod_groups.get("ns", "g") is None


async def test_an_unserved_workload_api_is_never_resynced() -> None:
    binder = cast(Binder, type("NoBinder", (), {"client": None, "instance": ""})())
    sched = PodiumScheduler(binder, {"podium": default_profile("podium")})
    await sched.discover(cast(Any, _Client(None)))
    assert not {"workloads", "podgroups"} & set(sched.resync.kinds)
