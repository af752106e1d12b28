"""NodeDeclaredFeatures: the pod's inferred needs against node.status.declaredFeatures."""

from __future__ import annotations

import random
from typing import Any

import pytest

from podium.algorithms.default_preemption import offline_message
from podium.algorithms.node_declared_features import (
    REASON,
    RESTART_ALL_CONTAINERS,
    USER_NAMESPACES_HOST_NETWORK,
    VOLUME_BIND_MOUNT_OPTIONS,
    NodeDeclaredFeatures,
    required_features,
)
from podium.framework.cycle import Scheduler
from podium.framework.plugin import ClusterEvent
from podium.framework.profile import DEFAULT_FILTERS
from podium.kube.objects import parse_node, parse_pod
from podium.policy import default_profile
from podium.scheduling.scheduler import node_change
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot

from .conftest import explain, node, pod, run_filter, snapshot, unresolvable

RESTART_ALL = {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
RESTART = {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}


def declaring(name: str, *features: str, **kwargs: Any) -> dict[str, Any]:
    body = node(name, **kwargs)
    if features:
        body["status"]["declaredFeatures"] = sorted(features)
    return body


def with_spec(body: dict[str, Any], **spec: Any) -> dict[str, Any]:
    body["spec"].update(spec)
    return body


def restart_rules(*rules: dict[str, Any], init: bool = False) -> dict[str, Any]:
    body = pod("p")
    container = {"name": "c", "image": "pause", "restartPolicy": "Never"}
    container["restartPolicyRules"] = list(rules)
    if init:
        body["spec"]["initContainers"] = [container]
    else:
        body["spec"]["containers"] = [container]
    return body


def bind_mount(kind: str, options: list[str]) -> dict[str, Any]:
    body = pod("p")
    mount = {"name": "data", "mountPath": "/data", "bindMountOptions": options}
    body["spec"][kind] = [{"name": "x", "image": "pause", "volumeMounts": [mount]}]
    return body


# (pod, the features it needs)
NEEDS = [
    pytest.param(pod("p"), set(), id="plain-pod"),
    pytest.param(restart_rules(RESTART_ALL), {RESTART_ALL_CONTAINERS}, id="restart-all"),
    pytest.param(
        restart_rules(RESTART_ALL, init=True), {RESTART_ALL_CONTAINERS}, id="restart-all-init"
    ),
    pytest.param(
        restart_rules(RESTART, RESTART_ALL), {RESTART_ALL_CONTAINERS}, id="restart-all-second"
    ),
    pytest.param(restart_rules(RESTART), set(), id="restart-container-only"),
    pytest.param(
        with_spec(
            pod("p"),
            ephemeralContainers=[{"name": "e", "restartPolicyRules": [RESTART_ALL]}],
        ),
        set(),
        id="ephemeral-restart-rule-ignored",
    ),
    pytest.param(
        with_spec(pod("p"), hostNetwork=True, hostUsers=False),
        {USER_NAMESPACES_HOST_NETWORK},
        id="host-network-user-namespace",
    ),
    pytest.param(with_spec(pod("p"), hostNetwork=True, hostUsers=True), set(), id="host-users"),
    pytest.param(with_spec(pod("p"), hostNetwork=True), set(), id="host-users-unset"),
    pytest.param(with_spec(pod("p"), hostUsers=False), set(), id="user-namespace-pod-network"),
    pytest.param(
        bind_mount("containers", ["noexec"]), {VOLUME_BIND_MOUNT_OPTIONS}, id="bind-mount"
    ),
    pytest.param(
        bind_mount("initContainers", ["nodev"]), {VOLUME_BIND_MOUNT_OPTIONS}, id="bind-mount-init"
    ),
    pytest.param(
        bind_mount("ephemeralContainers", ["nosuid"]),
        {VOLUME_BIND_MOUNT_OPTIONS},
        id="bind-mount-ephemeral",
    ),
    pytest.param(bind_mount("containers", []), set(), id="bind-mount-empty"),
    pytest.param(
        with_spec(restart_rules(RESTART_ALL), hostNetwork=True, hostUsers=False),
        {RESTART_ALL_CONTAINERS, USER_NAMESPACES_HOST_NETWORK},
        id="two-features",
    ),
    pytest.param({"spec": "odd"}, set(), id="odd-spec"),
    pytest.param(
        with_spec(pod("p"), containers=["odd", {"restartPolicyRules": "odd"}]),
        set(),
        id="odd-containers",
    ),
]


@pytest.mark.parametrize(("body", "expected"), NEEDS)
def test_required_features(body: dict[str, Any], expected: set[str]) -> None:
    assert required_features(body) == expected


# (features the nodes declare, the pod, the reason per node)
NODES = [("none", ()), ("restart", (RESTART_ALL_CONTAINERS,)), ("other", ("SomeOtherFeature",))]
FILTER = [
    pytest.param(pod("p"), {"none": "", "restart": "", "other": ""}, id="needs-nothing"),
    pytest.param(
        restart_rules(RESTART_ALL),
        {"none": REASON, "restart": "", "other": REASON},
        id="needs-restart-all",
    ),
    pytest.param(
        with_spec(restart_rules(RESTART_ALL), hostNetwork=True, hostUsers=False),
        {"none": REASON, "restart": REASON, "other": REASON},
        id="needs-two-node-has-one",
    ),
]


@pytest.mark.parametrize(("incoming", "expected"), FILTER)
def test_filter(incoming: dict[str, Any], expected: dict[str, str]) -> None:
    snap = snapshot([declaring(name, *features) for name, features in NODES])
    assert run_filter(NodeDeclaredFeatures(), snap, incoming) == expected


def test_node_declaring_more_features_fits() -> None:
    snap = snapshot([declaring("n1", "AFeature", RESTART_ALL_CONTAINERS, "ZFeature")])
    assert run_filter(NodeDeclaredFeatures(), snap, restart_rules(RESTART_ALL)) == {"n1": ""}


def test_rejection_is_unresolvable_and_explained() -> None:
    snap = snapshot([declaring("n1", "SomeOtherFeature"), declaring("n2")])
    incoming = with_spec(restart_rules(RESTART_ALL), hostNetwork=True, hostUsers=False)
    assert unresolvable(NodeDeclaredFeatures(), snap, incoming) == {"n1", "n2"}
    assert explain(NodeDeclaredFeatures(), snap, incoming, "n1") == (
        "node does not declare RestartAllContainersOnContainerExits, "
        "UserNamespacesHostNetworkSupport in status.declaredFeatures"
    )


def test_snapshot_sees_a_node_declare_a_feature() -> None:
    cache = Cache()
    cache.add_node(parse_node(declaring("n1")))
    snap = Snapshot()
    snap.update(cache)
    incoming = restart_rules(RESTART_ALL)
    assert run_filter(NodeDeclaredFeatures(), snap, incoming) == {"n1": REASON}
    cache.add_node(parse_node(declaring("n1", RESTART_ALL_CONTAINERS)))
    snap.update(cache)
    assert run_filter(NodeDeclaredFeatures(), snap, incoming) == {"n1": ""}


# (old node, new node, does the change requeue a pod this plugin rejected)
EVENTS = [
    pytest.param(None, declaring("n1", RESTART_ALL_CONTAINERS), True, id="node-add"),
    pytest.param(None, declaring("n1"), True, id="node-add-without-features"),
    pytest.param(
        declaring("n1"), declaring("n1", RESTART_ALL_CONTAINERS), True, id="feature-added"
    ),
    pytest.param(
        declaring("n1", RESTART_ALL_CONTAINERS), declaring("n1"), True, id="feature-removed"
    ),
    pytest.param(
        declaring("n1", RESTART_ALL_CONTAINERS),
        declaring("n1", RESTART_ALL_CONTAINERS),
        False,
        id="features-unchanged",
    ),
    pytest.param(
        declaring("n1", RESTART_ALL_CONTAINERS),
        declaring("n1", RESTART_ALL_CONTAINERS, labels={"a": "b"}),
        False,
        id="label-change-only",
    ),
]


@pytest.mark.parametrize(("old", "new", "requeue"), EVENTS)
def test_node_events_requeue(
    old: dict[str, Any] | None, new: dict[str, Any], requeue: bool
) -> None:
    event = node_change(None if old is None else parse_node(old), parse_node(new))
    assert bool(NodeDeclaredFeatures.events & event) is requeue


def test_metadata() -> None:
    assert NodeDeclaredFeatures.description
    assert NodeDeclaredFeatures.events == (
        ClusterEvent.NODE_ADD | ClusterEvent.NODE_DECLARED_FEATURES
    )
    assert ClusterEvent.NODE_DECLARED_FEATURES in ClusterEvent.any_node_change()


def test_default_profile_runs_it_last() -> None:
    assert DEFAULT_FILTERS[-1] == "NodeDeclaredFeatures"
    assert "NodeConditions" not in DEFAULT_FILTERS


# (pod's nodeSelector, chosen node, FailedScheduling message)
PROFILE = [
    pytest.param(None, "declares", "", id="goes-to-declaring-node"),
    pytest.param(
        {"kubernetes.io/hostname": "plain"},
        "",
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) didn't match Pod's required features. preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling.",
        id="pinned-to-other-node",
    ),
]


@pytest.mark.parametrize(("selector", "chosen", "message"), PROFILE)
def test_default_profile(selector: dict[str, str] | None, chosen: str, message: str) -> None:
    nodes = [
        declaring("declares", RESTART_ALL_CONTAINERS, hostname=True),
        declaring("plain", hostname=True),
    ]
    incoming = restart_rules(RESTART_ALL)
    if selector is not None:
        incoming["spec"]["nodeSelector"] = selector
    snap = snapshot(nodes)
    profile = default_profile()
    target = parse_pod(incoming)
    placement = Scheduler(random.Random(7)).schedule(profile, snap, target)
    assert placement.node == chosen
    if not chosen:
        diagnosis = placement.diagnosis
        assert diagnosis is not None
        diagnosis.post_filter_msg = offline_message(
            profile, snap, target, diagnosis, random.Random(7)
        )
        assert diagnosis.message() == message
