"""Fuzzing the entry points that see raw API objects (issue 7).

Objects shaped like real Pods and Nodes, with random junk in any field, go
into ``parse_pod``/``parse_node`` and into ``PodiumScheduler.on_pod``/``on_node``
(with a dummy Binder; the handlers never call it). No exception may escape:
a poison object must not stop a watch. A second group drives sequences of
events, interleaved with the assume/forget/confirm steps a scheduling cycle and
a bind perform, and checks the cache's bookkeeping after each. A third runs
whole scheduling cycles on API-valid (typed, randomly filled) objects.

Bounded: a few hundred examples per test, no deadline per example, and a
whole-file runtime of well under a minute.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium.kube.objects import NodeInfo, PodInfo, parse_node, parse_pod
from podium.policy import default_profile
from podium.scheduling.binder import Binder, BindOutcome
from podium.scheduling.nominator import Nominator
from podium.scheduling.scheduler import PodiumScheduler

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- strategies ----------------------------------------------------------------------------

scalar = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
junk = st.recursive(
    scalar,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)

QUANTITIES = [
    "100m", "1", "0", "1e12", "1E3", "-1", "-100m", "1Ki", "1.5Gi", "0.5", ".5", "+1",
    "9223372036854775807", "99999999999999999999999", "1e400", "1e-9", "abc", "", "Mi",
    "1.2.3", "0x10", "1 Gi", "NaN", "inf", "\u0661",
]  # fmt: skip
quantity = st.sampled_from(QUANTITIES) | st.text(max_size=8) | st.integers() | st.floats() | junk
resource_name = st.sampled_from(
    ["cpu", "memory", "pods", "ephemeral-storage", "example.com/gpu", "hugepages-2Mi"]
) | st.text(max_size=10)
resource_list = st.dictionaries(resource_name, quantity, max_size=4) | junk
label_map = st.dictionaries(st.text(max_size=10), st.text(max_size=10) | junk, max_size=4) | junk
word = st.sampled_from(["a", "b", "zone-1", "", "kubernetes.io/hostname"]) | st.text(max_size=8)


def maybe_junk(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually the shaped value, sometimes anything at all."""
    return st.one_of(strategy, strategy, strategy, junk)


requirement = st.fixed_dictionaries(
    {},
    optional={
        "key": maybe_junk(word),
        "operator": maybe_junk(
            st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"])
        ),
        "values": maybe_junk(st.lists(maybe_junk(word), max_size=4)),
    },
)
selector_term = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": maybe_junk(st.lists(maybe_junk(requirement), max_size=3)),
        "matchFields": maybe_junk(st.lists(maybe_junk(requirement), max_size=2)),
    },
)
label_selector = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": label_map,
        "matchExpressions": maybe_junk(st.lists(maybe_junk(requirement), max_size=2)),
    },
)
pod_affinity_term = st.fixed_dictionaries(
    {},
    optional={
        "labelSelector": maybe_junk(label_selector),
        "topologyKey": maybe_junk(word),
        "namespaces": maybe_junk(st.lists(word, max_size=2)),
        "namespaceSelector": maybe_junk(label_selector),
    },
)
weighted = st.fixed_dictionaries(
    {},
    optional={
        "weight": maybe_junk(st.integers(-5, 200)),
        "preference": maybe_junk(selector_term),
        "podAffinityTerm": maybe_junk(pod_affinity_term),
    },
)
affinity = st.fixed_dictionaries(
    {},
    optional={
        "nodeAffinity": maybe_junk(
            st.fixed_dictionaries(
                {},
                optional={
                    "requiredDuringSchedulingIgnoredDuringExecution": maybe_junk(
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "nodeSelectorTerms": maybe_junk(
                                    st.lists(maybe_junk(selector_term), max_size=3)
                                )
                            },
                        )
                    ),
                    "preferredDuringSchedulingIgnoredDuringExecution": maybe_junk(
                        st.lists(maybe_junk(weighted), max_size=2)
                    ),
                },
            )
        ),
        "podAffinity": maybe_junk(
            st.fixed_dictionaries(
                {},
                optional={
                    "requiredDuringSchedulingIgnoredDuringExecution": maybe_junk(
                        st.lists(maybe_junk(pod_affinity_term), max_size=2)
                    ),
                    "preferredDuringSchedulingIgnoredDuringExecution": maybe_junk(
                        st.lists(maybe_junk(weighted), max_size=2)
                    ),
                },
            )
        ),
        "podAntiAffinity": maybe_junk(
            st.fixed_dictionaries(
                {},
                optional={
                    "requiredDuringSchedulingIgnoredDuringExecution": maybe_junk(
                        st.lists(maybe_junk(pod_affinity_term), max_size=2)
                    )
                },
            )
        ),
    },
)
toleration = st.fixed_dictionaries(
    {},
    optional={
        "key": maybe_junk(word),
        "operator": maybe_junk(st.sampled_from(["Equal", "Exists", "", "Sometimes"])),
        "value": maybe_junk(word),
        "effect": maybe_junk(st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute", ""])),
        "tolerationSeconds": maybe_junk(st.integers()),
    },
)
port = st.fixed_dictionaries(
    {},
    optional={
        "containerPort": maybe_junk(st.integers(-1, 70000)),
        "hostPort": maybe_junk(st.integers(-1, 70000)),
        "protocol": maybe_junk(st.sampled_from(["TCP", "UDP", "SCTP", "x"])),
        "hostIP": maybe_junk(st.sampled_from(["0.0.0.0", "127.0.0.1", "::", "nonsense"])),
    },
)
container = st.fixed_dictionaries(
    {},
    optional={
        "name": maybe_junk(word),
        "image": maybe_junk(st.sampled_from(["pause", "a/b:1", "reg:5000/x", "x@sha256:00", ""])),
        "resources": maybe_junk(
            st.fixed_dictionaries({}, optional={"requests": resource_list, "limits": resource_list})
        ),
        "ports": maybe_junk(st.lists(maybe_junk(port), max_size=2)),
        "restartPolicy": maybe_junk(st.sampled_from(["Always", "Never", ""])),
    },
)
spread = st.fixed_dictionaries(
    {},
    optional={
        "maxSkew": maybe_junk(st.integers(-2, 5)),
        "topologyKey": maybe_junk(word),
        "whenUnsatisfiable": maybe_junk(st.sampled_from(["DoNotSchedule", "ScheduleAnyway", "x"])),
        "labelSelector": maybe_junk(label_selector),
        "minDomains": maybe_junk(st.integers(-1, 5)),
        "matchLabelKeys": maybe_junk(st.lists(word, max_size=2)),
        "nodeAffinityPolicy": maybe_junk(st.sampled_from(["Honor", "Ignore", "x"])),
        "nodeTaintsPolicy": maybe_junk(st.sampled_from(["Honor", "Ignore", "x"])),
    },
)
volume = st.fixed_dictionaries(
    {},
    optional={
        "name": maybe_junk(word),
        "persistentVolumeClaim": maybe_junk(st.fixed_dictionaries({"claimName": maybe_junk(word)})),
        "gcePersistentDisk": maybe_junk(
            st.fixed_dictionaries({"pdName": maybe_junk(word)}, optional={"readOnly": junk})
        ),
        "hostPath": junk,
    },
)
timestamp = maybe_junk(
    st.sampled_from(["2026-01-01T00:00:00Z", "2026-13-99T99:99:99Z", "yesterday"])
)
condition = st.fixed_dictionaries(
    {},
    optional={
        "type": maybe_junk(
            st.sampled_from(
                ["Ready", "PodScheduled", "MemoryPressure", "DiskPressure", "PodResizePending"]
            )
        ),
        "status": maybe_junk(st.sampled_from(["True", "False", "Unknown"])),
        "reason": maybe_junk(word),
        "message": maybe_junk(st.text(max_size=20)),
    },
)
uid = st.sampled_from(["u1", "u2", "u3", "u4", ""]) | junk
node_name = st.sampled_from(["n1", "n2", "n3", ""]) | junk
pod_meta = st.fixed_dictionaries(
    {},
    optional={
        "name": maybe_junk(st.sampled_from(["p1", "p2", "p3"])),
        "namespace": maybe_junk(st.sampled_from(["default", "ns"])),
        "uid": uid,
        "labels": label_map,
        "creationTimestamp": timestamp,
        "deletionTimestamp": timestamp,
        "resourceVersion": maybe_junk(st.text(max_size=4)),
    },
)
pod_spec = st.fixed_dictionaries(
    {},
    optional={
        "schedulerName": maybe_junk(st.sampled_from(["podium", "default-scheduler", ""])),
        "nodeName": node_name,
        "priority": maybe_junk(st.integers(-(2**40), 2**40)),
        "priorityClassName": maybe_junk(word),
        "containers": maybe_junk(st.lists(maybe_junk(container), max_size=3)),
        "initContainers": maybe_junk(st.lists(maybe_junk(container), max_size=2)),
        "overhead": resource_list,
        "resources": maybe_junk(
            st.fixed_dictionaries({}, optional={"requests": resource_list, "limits": resource_list})
        ),
        "nodeSelector": label_map,
        "affinity": maybe_junk(affinity),
        "tolerations": maybe_junk(st.lists(maybe_junk(toleration), max_size=3)),
        "topologySpreadConstraints": maybe_junk(st.lists(maybe_junk(spread), max_size=2)),
        "volumes": maybe_junk(st.lists(maybe_junk(volume), max_size=2)),
        "schedulingGates": maybe_junk(
            st.lists(maybe_junk(st.fixed_dictionaries({"name": maybe_junk(word)})), max_size=2)
        ),
        "preemptionPolicy": maybe_junk(st.sampled_from(["Never", "PreemptLowerPriority"])),
    },
)
container_status = st.fixed_dictionaries(
    {},
    optional={
        "name": maybe_junk(word),
        "allocatedResources": resource_list,
        "resources": maybe_junk(
            st.fixed_dictionaries({}, optional={"requests": resource_list, "limits": resource_list})
        ),
    },
)
pod_status = st.fixed_dictionaries(
    {},
    optional={
        "phase": maybe_junk(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"])),
        "qosClass": maybe_junk(st.sampled_from(["BestEffort", "Burstable", "Guaranteed"])),
        "containerStatuses": maybe_junk(st.lists(maybe_junk(container_status), max_size=2)),
        "initContainerStatuses": maybe_junk(st.lists(maybe_junk(container_status), max_size=1)),
        "allocatedResources": resource_list,
        "resources": maybe_junk(st.fixed_dictionaries({}, optional={"requests": resource_list})),
        "conditions": maybe_junk(st.lists(maybe_junk(condition), max_size=2)),
        "nominatedNodeName": maybe_junk(node_name),
    },
)
pod_body = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.just("v1"),
        "kind": st.just("Pod"),
        "metadata": maybe_junk(pod_meta),
        "spec": maybe_junk(pod_spec),
        "status": maybe_junk(pod_status),
    },
)
taint = st.fixed_dictionaries(
    {},
    optional={
        "key": maybe_junk(word),
        "value": maybe_junk(word),
        "effect": maybe_junk(st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute", "x"])),
    },
)
image = st.fixed_dictionaries(
    {},
    optional={
        "names": maybe_junk(st.lists(maybe_junk(word), max_size=2)),
        "sizeBytes": maybe_junk(st.integers(-10, 2**40)),
    },
)
node_body = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.just("v1"),
        "kind": st.just("Node"),
        "metadata": maybe_junk(
            st.fixed_dictionaries(
                {},
                optional={"name": node_name, "uid": uid, "labels": label_map},
            )
        ),
        "spec": maybe_junk(
            st.fixed_dictionaries(
                {},
                optional={
                    "taints": maybe_junk(st.lists(maybe_junk(taint), max_size=3)),
                    "unschedulable": maybe_junk(st.booleans()),
                },
            )
        ),
        "status": maybe_junk(
            st.fixed_dictionaries(
                {},
                optional={
                    "allocatable": resource_list,
                    "capacity": resource_list,
                    "conditions": maybe_junk(st.lists(maybe_junk(condition), max_size=3)),
                    "images": maybe_junk(st.lists(maybe_junk(image), max_size=2)),
                },
            )
        ),
    },
)
event_type = st.sampled_from([None, "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]) | junk


# -- a scheduler whose binder is never reached -------------------------------------------------


class DummyBinder:
    """Stands in for Binder: on_pod/on_node never call it; cycles may."""

    client = None  # a resync would LIST through it; no relist happens here
    instance = "test"

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    async def bind(self, pod: PodInfo, node: str) -> tuple[BindOutcome, str]:
        self.calls["bind"] += 1
        return BindOutcome.BOUND, ""

    async def set_condition(
        self, pod: PodInfo, reason: str, message: str, nominator: Nominator | None = None
    ) -> None:
        self.calls["set_condition"] += 1

    async def event(self, *args: Any, **kwargs: Any) -> None:
        self.calls["event"] += 1


def make_scheduler() -> PodiumScheduler:
    return PodiumScheduler(cast(Binder, DummyBinder()), {"podium": default_profile("podium")})


def check_cache(scheduler: PodiumScheduler) -> None:
    """Each node's totals equal the sum over its pods, and the pod index agrees."""
    cache = scheduler.cache
    for name, state in cache.nodes.items():
        assert state.name == name
        total: Counter[str] = Counter()
        for pod in state.pods.values():
            total.update(pod.requests)
            assert cache.pods[pod.uid].node == name
        assert +total == +state.requested, (name, total, state.requested)
        assert state.node is not None or state.pods, f"empty node-less state {name} kept"
    for uid, placed in cache.pods.items():
        assert uid in cache.nodes[placed.node].pods
    for uid, entry in scheduler.queue.entries.items():
        assert entry.pod.uid == uid


# -- 1. parsers ----------------------------------------------------------------------------------


@FUZZ
@given(body=pod_body | junk.filter(lambda v: isinstance(v, dict)))
def test_parse_pod_never_raises(body: dict[str, Any]) -> None:
    info = parse_pod(body)
    assert isinstance(info.uid, str) and isinstance(info.name, str)
    assert isinstance(info.priority, int)
    assert all(isinstance(v, int) and v >= 0 for v in info.requests.values())
    assert info.nonzero_cpu >= 0 and info.nonzero_memory >= 0
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in info.labels.items())


@FUZZ
@given(body=node_body | junk.filter(lambda v: isinstance(v, dict)))
def test_parse_node_never_raises(body: dict[str, Any]) -> None:
    info = parse_node(body)
    assert isinstance(info.name, str)
    assert all(isinstance(v, int) and v >= 0 for v in info.allocatable.values())
    assert all(isinstance(v, int) and v >= 0 for v in info.images.values())
    assert isinstance(info.problems, list)


# -- 2. handlers -------------------------------------------------------------------------------


@FUZZ
@given(events=st.lists(st.tuples(st.booleans(), event_type, pod_body | node_body), max_size=12))
def test_on_pod_and_on_node_never_raise(events: list[tuple[bool, Any, Mapping[str, Any]]]) -> None:
    scheduler = make_scheduler()
    for is_pod, kind, body in events:
        if is_pod:
            scheduler.on_pod(kind, body)
        else:
            scheduler.on_node(kind, body)
        check_cache(scheduler)
    scheduler.pending()


# Realistic, typed objects for the stateful test: few names and uids, so events collide.
small_pod = st.builds(
    lambda uid, node, cpu, phase, deleting: {
        "metadata": {
            "name": f"p-{uid}",
            "namespace": "ns",
            "uid": uid,
            **({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {}),
        },
        "spec": {
            "schedulerName": "podium",
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": phase},
    },
    st.sampled_from(["u1", "u2", "u3", "u4"]),
    st.sampled_from(["", "", "n1", "n2"]),
    st.sampled_from(["100m", "250m", "1"]),
    st.sampled_from(["Pending", "Running", "Succeeded"]),
    st.booleans(),
)
small_node = st.builds(
    lambda name, cpu: {
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "1Gi", "pods": "10"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    },
    st.sampled_from(["n1", "n2"]),
    st.sampled_from(["1", "2"]),
)
step: st.SearchStrategy[tuple[str, Any, Mapping[str, Any]]] = st.one_of(
    st.tuples(st.just("pod"), st.sampled_from([None, "ADDED", "MODIFIED", "DELETED"]), small_pod),
    st.tuples(st.just("node"), st.sampled_from([None, "ADDED", "MODIFIED", "DELETED"]), small_node),
    # A scheduling cycle assumes a queued pod on a node; a failed bind forgets it, a successful
    # one is confirmed by the watch (a pod event).
    st.tuples(st.just("assume"), st.sampled_from(["n1", "n2"]), st.just({})),
    st.tuples(st.just("forget"), st.none(), st.just({})),
)


def _apply(scheduler: PodiumScheduler, op: str, arg: Any, body: Mapping[str, Any]) -> None:
    cache, queue = scheduler.cache, scheduler.queue
    if op == "pod":
        scheduler.on_pod(arg, body)
    elif op == "node":
        scheduler.on_node(arg, body)
    elif op == "assume":
        # As schedule_one does: only a queued pod the cache does not hold, on a known node.
        state = cache.nodes.get(arg)
        for uid, entry in list(queue.entries.items()):
            if uid not in cache.pods and state is not None and state.node is not None:
                cache.assume_pod(entry.pod, arg)
                queue.done(uid)
                return
    else:
        assumed = cache.assumed_pods()
        if assumed:
            cache.forget_pod(assumed[0].pod)


@FUZZ
@given(steps=st.lists(step, max_size=25))
def test_event_sequences_with_assumed_pods_keep_the_cache_consistent(
    steps: list[tuple[str, Any, Mapping[str, Any]]],
) -> None:
    """Includes deleting a node while pods are assumed on it (binds in flight)."""
    scheduler = make_scheduler()
    for op, arg, body in steps:
        _apply(scheduler, op, arg, body)
        check_cache(scheduler)


def test_deleting_a_node_that_holds_only_assumed_pods() -> None:
    """The smallest case the sequence test finds: no exception, and the pod is released."""
    scheduler = make_scheduler()
    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "1", "pods": "5"}}}
    scheduler.on_node("ADDED", node)
    pod = parse_pod({"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {}})
    scheduler.cache.assume_pod(pod, "n1")
    scheduler.on_node("DELETED", node)
    assert "n1" not in scheduler.cache.nodes
    assert "u" not in scheduler.cache.pods


# -- 3. whole cycles on API-valid objects -----------------------------------------------------

name_value = st.sampled_from(["a", "b", "c"])
typed_requirement = st.builds(
    lambda key, op, values: {"key": key, "operator": op, "values": values},
    st.sampled_from(["zone", "kubernetes.io/hostname", "tier"]),
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    st.lists(st.sampled_from(["a", "b", "n1", "1", "10"]), max_size=3),
)
typed_affinity = st.fixed_dictionaries(
    {},
    optional={
        "nodeAffinity": st.fixed_dictionaries(
            {},
            optional={
                "requiredDuringSchedulingIgnoredDuringExecution": st.builds(
                    lambda terms: {"nodeSelectorTerms": terms},
                    st.lists(
                        st.builds(
                            lambda e: {"matchExpressions": e},
                            st.lists(typed_requirement, max_size=2),
                        ),
                        min_size=1,
                        max_size=2,
                    ),
                ),
                "preferredDuringSchedulingIgnoredDuringExecution": st.lists(
                    st.builds(
                        lambda w, e: {"weight": w, "preference": {"matchExpressions": e}},
                        st.integers(1, 100),
                        st.lists(typed_requirement, max_size=2),
                    ),
                    max_size=2,
                ),
            },
        ),
        "podAntiAffinity": st.fixed_dictionaries(
            {},
            optional={
                "requiredDuringSchedulingIgnoredDuringExecution": st.lists(
                    st.builds(
                        lambda v, k: {
                            "labelSelector": {"matchLabels": {"app": v}},
                            "topologyKey": k,
                        },
                        name_value,
                        st.sampled_from(["zone", "kubernetes.io/hostname"]),
                    ),
                    max_size=1,
                )
            },
        ),
        "podAffinity": st.fixed_dictionaries(
            {},
            optional={
                "preferredDuringSchedulingIgnoredDuringExecution": st.lists(
                    st.builds(
                        lambda w, v: {
                            "weight": w,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app": v}},
                                "topologyKey": "zone",
                            },
                        },
                        st.integers(1, 100),
                        name_value,
                    ),
                    max_size=1,
                )
            },
        ),
    },
)
typed_pod = st.builds(
    lambda i, cpu, mem, app, selector, tolerations, aff, spread, host_port, prio: {
        "metadata": {
            "name": f"p{i}",
            "namespace": "ns",
            "uid": f"uid-p{i}",
            "labels": {"app": app},
        },
        "spec": {
            "schedulerName": "podium",
            "priority": prio,
            "containers": [
                {
                    "name": "c",
                    "image": "pause",
                    "resources": {"requests": {"cpu": cpu, "memory": mem}},
                    "ports": [{"containerPort": 80, "hostPort": host_port}] if host_port else [],
                }
            ],
            "nodeSelector": selector,
            "tolerations": tolerations,
            "affinity": aff,
            "topologySpreadConstraints": spread,
        },
        "status": {"phase": "Pending"},
    },
    st.integers(0, 10**6),
    st.sampled_from(["0", "100m", "1", "3", "1e12"]),
    st.sampled_from(["0", "100Mi", "1Gi", "64Gi"]),
    name_value,
    st.dictionaries(st.sampled_from(["zone", "tier"]), name_value, max_size=1),
    st.lists(
        st.builds(
            lambda k, op, e: {"key": k, "operator": op, "effect": e},
            st.sampled_from(["dedicated", "node.kubernetes.io/unschedulable"]),
            st.just("Exists"),
            st.sampled_from(["NoSchedule", ""]),
        ),
        max_size=1,
    ),
    typed_affinity,
    st.lists(
        st.builds(
            lambda k, skew, when, v: {
                "maxSkew": skew,
                "topologyKey": k,
                "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"app": v}},
            },
            st.sampled_from(["zone", "kubernetes.io/hostname"]),
            st.integers(1, 3),
            st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]),
            name_value,
        ),
        max_size=1,
    ),
    st.sampled_from([0, 0, 8080]),
    st.integers(-10, 10),
)
typed_node = st.builds(
    lambda i, cpu, zone, tier, tainted, ready, cordoned: {
        "metadata": {
            "name": f"n{i}",
            "uid": f"uid-n{i}",
            "labels": {"zone": zone, "tier": tier, "kubernetes.io/hostname": f"n{i}"},
        },
        "spec": {
            "unschedulable": cordoned,
            "taints": [{"key": "dedicated", "effect": "NoSchedule"}] if tainted else [],
        },
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "4"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    },
    st.integers(0, 5),
    st.sampled_from(["0", "1", "4"]),
    name_value,
    name_value,
    st.booleans(),
    st.booleans(),
    st.booleans(),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(typed_node, max_size=5), pods=st.lists(typed_pod, min_size=1, max_size=8))
def test_scheduling_cycles_on_valid_objects_never_raise(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]]
) -> None:
    """Every pod gets one cycle; each ends bound (dummy bind) or requeued, never raising."""

    async def run() -> None:
        scheduler = make_scheduler()
        for body in nodes:
            scheduler.on_node("ADDED", body)
        for body in pods:
            scheduler.on_pod("ADDED", body)
        tried = 0
        while scheduler.queue.counts()["active"] and tried < 20:
            entry = await asyncio.wait_for(scheduler.queue.pop(), 1)
            scheduler.schedule_one(entry)
            tried += 1
            await asyncio.sleep(0)  # let dummy binds and reports run
        await scheduler.settle()
        check_cache(scheduler)
        for state in scheduler.cache.nodes.values():
            node: NodeInfo | None = state.node
            if node is None:
                continue
            for resource, amount in state.requested.items():
                assert amount <= node.allocatable.get(resource, 0), (node.name, resource)
            assert len(state.pods) <= node.allocatable.get("pods", 0)

    asyncio.run(run())


@pytest.mark.parametrize("value", QUANTITIES)
def test_every_listed_quantity_parses_or_is_recorded(value: str) -> None:
    body = {
        "metadata": {"name": "p", "uid": "u"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": value}}}]},
    }
    info = parse_pod(body)
    assert info.problem or "cpu" in info.requests or value == ""
