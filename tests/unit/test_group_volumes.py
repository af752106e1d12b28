"""A pod group's WaitForFirstConsumer volumes: each member's PVs are assumed by its
Reserve as the group's cycle assumes it (AssumePodVolumes), so the next member's
Filter sees them taken; a group that does not fit reverts every assumption."""

from __future__ import annotations

import random
from collections.abc import Coroutine
from typing import Any

import pytest

from podium.framework.binding import BindingHandle, run_group_reserve, run_group_unreserve
from podium.framework.cycle import Scheduler
from podium.framework.podgroup import Board, place_group
from podium.framework.queued import QueuedPod
from podium.kube.manifests import make_node, make_pod
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.policy import default_profile
from podium.scheduling.nominator import Nominator
from podium.state.podgroups import parse_pod_group
from podium.state.snapshot import Snapshot, build_snapshot

HOSTNAME = "kubernetes.io/hostname"


def _storage(pvs: dict[str, int], members: int) -> list[dict[str, Any]]:
    """A WaitForFirstConsumer class, ``pvs[node]`` local PVs on each node, one claim per
    member."""
    docs: list[dict[str, Any]] = [
        {
            "kind": "StorageClass",
            "metadata": {"name": "local", "resourceVersion": "1"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    ]
    for node, count in pvs.items():
        for i in range(count):
            term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
            docs.append(
                {
                    "kind": "PersistentVolume",
                    "metadata": {"name": f"{node}-pv{i}", "resourceVersion": "1"},
                    "spec": {
                        "capacity": {"storage": "1Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "local",
                        "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
                    },
                    "status": {"phase": "Available"},
                }
            )
    for i in range(members):
        docs.append(
            {
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": f"data-{i}",
                    "namespace": "default",
                    "uid": f"pvc-{i}",
                    "resourceVersion": "1",
                },
                "spec": {
                    "storageClassName": "local",
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
                "status": {"phase": "Pending"},
            }
        )
    return docs


def _member(i: int, cpu: str, claim: int) -> PodInfo:
    body = make_pod(f"m{i}", cpu=cpu)
    body["metadata"].update(
        namespace="default", uid=f"uid-m{i}", creationTimestamp=f"2026-01-01T00:00:0{i}Z"
    )
    body["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    body["spec"]["volumes"] = [
        {"name": "v", "persistentVolumeClaim": {"claimName": f"data-{claim}"}}
    ]
    return parse_pod(body)


def _handle(snapshot: Snapshot) -> BindingHandle:
    async def event(*args: Any) -> None:
        return None

    async def preempting(preemptor: str, uids: list[str], work: Coroutine[Any, Any, bool]) -> None:
        await work

    return BindingHandle(
        client=None,  # type: ignore[arg-type]  # Reserve and Unreserve write nothing
        spawn=lambda work: work.close(),
        snapshot=snapshot,
        observe=lambda kind, event_type, body: None,
        wake=lambda uids, plugin, event: None,
        event=event,
        nominator=Nominator(),
        preempting=preempting,
    )


@pytest.mark.parametrize(
    ("pvs", "cpu", "claims", "placed"),
    [
        pytest.param({"n1": 1, "n2": 1}, "1", [0, 1], {"n1": 1, "n2": 1}, id="one-pv-per-node"),
        pytest.param({"n1": 2, "n2": 0}, "1", [0, 1], {"n1": 2}, id="both-pvs-on-one-node"),
        # n1's two PVs are free, but its cpu holds one member: the second takes n2's PV.
        pytest.param({"n1": 2, "n2": 1}, "3", [0, 1], {"n1": 1, "n2": 1}, id="cpu-spreads-them"),
        pytest.param({"n1": 1, "n2": 1}, "1", [0, 1, 2], {}, id="three-members-two-pvs"),
        pytest.param({"n1": 2, "n2": 0}, "3", [0, 1], {}, id="pvs-where-cpu-runs-out"),
        # One claim for both: the second member goes where the first one's PV is.
        pytest.param({"n1": 1, "n2": 1}, "1", [0, 0], {"n1": 2}, id="shared-claim-one-pv"),
        pytest.param({"n1": 1, "n2": 1}, "3", [0, 0], {}, id="shared-claim-node-full"),
    ],
)
def test_members_never_take_the_same_pv_and_a_failed_group_holds_none(
    pvs: dict[str, int], cpu: str, claims: list[int], placed: dict[str, int]
) -> None:
    nodes = [parse_node(make_node(n, cpu="4", labels={HOSTNAME: n})) for n in ("n1", "n2")]
    members = len(claims)
    cache, snapshot = build_snapshot(nodes, [], storage=_storage(pvs, len(set(claims))))
    profile = default_profile()
    handle = _handle(snapshot)
    reserved: dict[str, str] = {}

    def reserve(pod: PodInfo, node: str) -> None:
        reserved[pod.uid] = node
        run_group_reserve(profile, handle, pod, node)

    def unreserve(pod: PodInfo) -> None:
        run_group_unreserve(profile, handle, pod, reserved.pop(pod.uid))

    board = Board(
        Scheduler(random.Random(0)), cache, snapshot, reserve=reserve, unreserve=unreserve
    )
    group = parse_pod_group(
        {
            "metadata": {"name": "g", "namespace": "default", "resourceVersion": "1"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": members}}},
        }
    )
    entries = [QueuedPod(_member(i, cpu, c)) for i, c in enumerate(claims)]
    outcome = place_group(board, profile, group, entries, [])
    assert outcome.success == bool(placed)
    volumes = snapshot.volumes
    if not placed:
        assert not volumes.assumed, "a group that does not fit holds no PV"
        return
    on = {}
    for entry, placement in outcome.placements:
        assert placement is not None
        on[entry.pod.uid] = placement.node
    counts: dict[str, int] = {}
    for node in on.values():
        counts[node] = counts.get(node, 0) + 1
    assert counts == placed
    # Each claim has its own PV, assumed on the node of every member naming it.
    taken = {
        pv.claim_ref.name if pv.claim_ref else "": name for name, pv in volumes.assumed.items()
    }
    assert sorted(taken) == sorted(f"data-{c}" for c in set(claims)), taken
    for i, c in enumerate(claims):
        assert taken[f"data-{c}"].startswith(on[f"uid-m{i}"] + "-")
    for entry in reversed(entries):
        unreserve(entry.pod)
    assert not volumes.assumed
