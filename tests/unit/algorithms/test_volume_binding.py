"""VolumeBinding: PreFilter verdicts, per-node Filter reasons, chosen PVs, and Score."""

from __future__ import annotations

from typing import Any

import pytest

from podium.algorithms.volume_binding import (
    BIND_CONFLICT,
    IMMEDIATE,
    NODE_CONFLICT,
    PV_NOT_EXIST,
    VolumeBinding,
    plan_volumes,
)
from podium.framework.binding import (
    BindingHandle,
    run_pre_bind_pre_flights,
    run_reserve,
    run_unreserve,
)
from podium.framework.profile import Profile
from podium.kube.objects import parse_pod
from podium.scheduling.nominator import Nominator

from .conftest import cycle, node, pod, run_filter, unresolvable
from .volume_builders import (
    HOSTNAME,
    ZONE,
    affinity,
    claims,
    pv,
    pvc,
    storage_class,
    volume_snapshot,
)

NODES = [node("a", zone="z1", hostname=True), node("b", zone="z2", hostname=True)]

# (PVs, PVCs, claims the incoming pod uses, node -> reason ("" fits))
FILTER_CASES = [
    pytest.param([], [], [], {"a": "", "b": ""}, id="no-claims"),
    pytest.param(
        [],
        [],
        ["gone"],
        {
            "a": 'persistentvolumeclaim "gone" not found',
            "b": 'persistentvolumeclaim "gone" not found',
        },
        id="missing-claim",
    ),
    pytest.param(
        [],
        [pvc("c", deleting=True)],
        ["c"],
        {
            "a": 'persistentvolumeclaim "c" is being deleted',
            "b": 'persistentvolumeclaim "c" is being deleted',
        },
        id="deleting-claim",
    ),
    pytest.param(
        [], [pvc("c", sc="imm")], ["c"], {"a": IMMEDIATE, "b": IMMEDIATE}, id="immediate-unbound"
    ),
    pytest.param(
        [],
        [pvc("c", sc="unknown-class")],
        ["c"],
        {"a": IMMEDIATE, "b": IMMEDIATE},
        id="unknown-class-is-immediate",
    ),
    pytest.param(
        [pv("p", claim="c", phase="Released")],
        [pvc("c")],
        ["c"],
        {"a": "", "b": ""},
        id="wffc-pv-prebound-to-the-claim-any-phase",
    ),
    pytest.param(
        [pv("p", claim="someone-else")],
        [pvc("c")],
        ["c"],
        {"a": BIND_CONFLICT, "b": BIND_CONFLICT},
        id="wffc-pv-prebound-to-another-claim",
    ),
    pytest.param(
        [pv("p", phase="Bound", node_affinity=affinity(ZONE, "z1"), claim="c")],
        [pvc("c", volume="p")],
        ["c"],
        {"a": "", "b": NODE_CONFLICT},
        id="bound-pv-zone-affinity",
    ),
    pytest.param(
        [pv("p", phase="Bound", node_affinity=affinity(HOSTNAME, "b"), claim="c")],
        [pvc("c", volume="p")],
        ["c"],
        {"a": NODE_CONFLICT, "b": ""},
        id="bound-local-pv-filters-every-node",
    ),
    pytest.param(
        [],
        [pvc("c", volume="nope")],
        ["c"],
        {"a": PV_NOT_EXIST, "b": PV_NOT_EXIST},
        id="bound-pv-missing",
    ),
    pytest.param(
        [pv("p", node_affinity=affinity(HOSTNAME, "b"))],
        [pvc("c")],
        ["c"],
        {"a": BIND_CONFLICT, "b": ""},
        id="wffc-local-pv",
    ),
    pytest.param(
        [pv("p", size="1Gi")],
        [pvc("c", size="2Gi")],
        ["c"],
        {"a": BIND_CONFLICT, "b": BIND_CONFLICT},
        id="wffc-pv-too-small",
    ),
    pytest.param(
        [pv("p", modes=["ReadWriteOnce"])],
        [pvc("c", modes=["ReadWriteMany"])],
        ["c"],
        {"a": BIND_CONFLICT, "b": BIND_CONFLICT},
        id="wffc-access-mode-missing",
    ),
    pytest.param(
        [pv("p", phase="Released")],
        [pvc("c")],
        ["c"],
        {"a": BIND_CONFLICT, "b": BIND_CONFLICT},
        id="wffc-pv-not-available",
    ),
    pytest.param(
        [pv("p", sc="other")],
        [pvc("c")],
        ["c"],
        {"a": BIND_CONFLICT, "b": BIND_CONFLICT},
        id="wffc-pv-other-class",
    ),
    pytest.param(
        [pv("p")],
        [pvc("c1"), pvc("c2")],
        ["c1", "c2"],
        {"a": BIND_CONFLICT, "b": BIND_CONFLICT},
        id="wffc-one-pv-two-claims",
    ),
    pytest.param(
        [pv("p")],
        [pvc("c", annotations={"volume.kubernetes.io/selected-node": "b"})],
        ["c"],
        {"a": BIND_CONFLICT, "b": BIND_CONFLICT},
        id="selected-node-without-provisioner",
    ),
    pytest.param(
        [pv("p", phase="Bound", node_affinity=affinity(ZONE, "z9"), claim="c1")],
        [pvc("c1", volume="p"), pvc("c2")],
        ["c1", "c2"],
        {"a": f"{NODE_CONFLICT}+{BIND_CONFLICT}", "b": f"{NODE_CONFLICT}+{BIND_CONFLICT}"},
        id="both-reasons-on-one-node",
    ),
]


def _reasons(snap: Any, incoming: dict[str, Any]) -> dict[str, str]:
    """run_filter, but joining the several reasons VolumeBinding may give one node."""
    plugin = VolumeBinding()
    try:
        return run_filter(plugin, snap, incoming)
    except AssertionError:
        c = cycle(snap, incoming)
        plugin.pre_filter(c)
        out: dict[str, list[str]] = {n: [] for n in snap.names}
        nodes = snap.all_nodes()
        for rejection in plugin.filter(c, nodes):
            for i in nodes[rejection.mask]:
                out[snap.names[i]].append(rejection.reason)
        return {n: "+".join(r) for n, r in out.items()}


@pytest.mark.parametrize(("pvs", "pvcs", "used", "expected"), FILTER_CASES)
def test_filter(pvs: list[Any], pvcs: list[Any], used: list[str], expected: dict[str, str]) -> None:
    snap = volume_snapshot(NODES, pvs=pvs, pvcs=pvcs)
    assert _reasons(snap, pod("p", volumes=claims(*used))) == expected


def test_filter_rejections_are_unresolvable() -> None:
    snap = volume_snapshot(NODES, pvs=[pv("p", size="1Gi")], pvcs=[pvc("c", size="5Gi")])
    assert unresolvable(VolumeBinding(), snap, pod("p", volumes=claims("c"))) == {"a", "b"}


# (free PVs, claims (name, size), expected claim -> PV on node a)
PLAN_CASES = [
    pytest.param(
        [pv("big", size="10Gi"), pv("small", size="2Gi"), pv("tiny", size="1Gi")],
        [("c", "2Gi")],
        {"c": "small"},
        id="smallest-fit",
    ),
    pytest.param(
        [pv("p1", size="1Gi"), pv("p5", size="5Gi")],
        [("big", "3Gi"), ("small", "1Gi")],
        {"small": "p1", "big": "p5"},
        id="claims-matched-smallest-first",
    ),
    pytest.param(
        [pv("other", size="1Gi"), pv("pre", size="5Gi", claim="c", phase="Available")],
        [("c", "1Gi")],
        {"c": "pre"},
        id="prebound-pv-wins",
    ),
    pytest.param(
        [pv("far", size="1Gi", node_affinity=affinity(ZONE, "z2")), pv("near", size="3Gi")],
        [("c", "1Gi")],
        {"c": "near"},
        id="node-affinity-before-size",
    ),
]


@pytest.mark.parametrize(("pvs", "wanted", "expected"), PLAN_CASES)
def test_plan_for_the_selected_node(
    pvs: list[Any], wanted: list[tuple[str, str]], expected: dict[str, str]
) -> None:
    snap = volume_snapshot(NODES, pvs=pvs, pvcs=[pvc(n, size=s) for n, s in wanted])
    incoming = parse_pod(pod("p", volumes=claims(*(n for n, _ in wanted))))
    plan = plan_volumes(snap.volumes, incoming, snap.nodes[snap.index["a"]])
    assert {c.name: v.name for c, v in plan.static} == expected


def test_assumed_pv_is_not_offered_again() -> None:
    snap = volume_snapshot(NODES, pvs=[pv("only")], pvcs=[pvc("c1"), pvc("c2")])
    first = parse_pod(pod("p1", volumes=claims("c1")))
    plan = plan_volumes(snap.volumes, first, snap.nodes[0])
    for claim, volume in plan.static:
        snap.volumes.assume(claim, volume)
    assert _reasons(snap, pod("p2", volumes=claims("c2"))) == {
        "a": BIND_CONFLICT,
        "b": BIND_CONFLICT,
    }
    snap.volumes.forget(["only"])
    assert _reasons(snap, pod("p2", volumes=claims("c2"))) == {"a": "", "b": ""}


def test_provisioner_class_passes_where_allowed() -> None:
    classes = [
        {
            **storage_class("dyn", provisioner="csi.example.com"),
            "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE, "values": ["z2"]}]}],
        }
    ]
    snap = volume_snapshot(NODES, pvcs=[pvc("c", sc="dyn")], classes=classes)
    assert _reasons(snap, pod("p", volumes=claims("c"))) == {"a": BIND_CONFLICT, "b": ""}


# (PV sizes per node for a 1Gi claim, expected normalized score per node)
SCORE_CASES = [
    pytest.param({"a": "2Gi", "b": "10Gi"}, {"a": 50, "b": 90}, id="least-utilised-first"),
    pytest.param({"a": "1Gi", "b": "4Gi"}, {"a": 0, "b": 75}, id="full-pv-scores-zero"),
]


@pytest.mark.parametrize(("sizes", "expected"), SCORE_CASES)
def test_score(sizes: dict[str, str], expected: dict[str, int]) -> None:
    pvs = [pv(f"pv-{n}", size=s, node_affinity=affinity(HOSTNAME, n)) for n, s in sizes.items()]
    snap = volume_snapshot(NODES, pvs=pvs, pvcs=[pvc("c", size="1Gi")])
    assert _scores(snap, pod("p", volumes=claims("c"))) == expected


def _scores(snap: Any, incoming: dict[str, Any]) -> dict[str, int] | None:
    """PreFilter, Filter, then Score over every node, as algorithm.py runs them."""
    plugin = VolumeBinding()
    c = cycle(snap, incoming)
    plugin.pre_filter(c)
    nodes = snap.all_nodes()
    plugin.filter(c, nodes)
    if not plugin.pre_score(c, nodes):
        return None
    raw = plugin.normalize(c, nodes, plugin.score(c, nodes))
    return {snap.names[int(i)]: int(v) for i, v in zip(nodes, raw, strict=True)}


def test_score_skipped_without_static_bindings() -> None:
    snap = volume_snapshot(NODES)
    assert _scores(snap, pod("p")) is None


@pytest.mark.parametrize(
    ("args", "error"),
    [
        pytest.param({"bindTimeoutSeconds": -1}, "non-negative", id="negative-timeout"),
        pytest.param({"bindTimeoutSeconds": "10"}, "non-negative", id="string-timeout"),
    ],
)
def test_bad_args(args: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        VolumeBinding(args)


def _handle(snap: Any) -> BindingHandle:
    async def event(pod: Any, reason: str, note: str) -> None:
        return None

    async def preempting(preemptor: str, uids: list[str], work: Any) -> None:
        await work

    return BindingHandle(
        client=None,  # type: ignore[arg-type]
        spawn=lambda work: None,
        snapshot=snap,
        observe=lambda kind, event_type, body: None,
        wake=lambda uids, plugin, event: None,
        event=event,
        nominator=Nominator(),
        preempting=preempting,
    )


@pytest.mark.parametrize(
    ("wanted", "pre_flight"),
    [
        pytest.param(["c1"], True, id="a-pv-to-bind"),
        pytest.param([], False, id="no-claims-skip"),
    ],
)
def test_reserve_assumes_and_unreserve_reverts_through_the_runner(
    wanted: list[str], pre_flight: bool
) -> None:
    """VolumeBinding's own Reserve (AssumePodVolumes), PreBindPreFlight and Unreserve
    (RevertAssumedPodVolumes), run by the framework's runner as any plugin's."""
    snap = volume_snapshot(NODES, pvs=[pv("only")], pvcs=[pvc("c1"), pvc("c2")])
    profile = Profile(filters=[VolumeBinding()])
    handle = _handle(snap)
    first = parse_pod(pod("p1", volumes=claims(*wanted)))
    assert run_reserve(profile, handle, first, "a") is None
    taken = {"a": BIND_CONFLICT, "b": BIND_CONFLICT} if wanted else {"a": "", "b": ""}
    assert _reasons(snap, pod("p2", volumes=claims("c2"))) == taken
    assert run_pre_bind_pre_flights(profile, handle, first, "a") is pre_flight
    assert run_unreserve(profile, handle, first, "a") is None
    assert _reasons(snap, pod("p2", volumes=claims("c2"))) == {"a": "", "b": ""}
