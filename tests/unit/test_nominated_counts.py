"""Nominated pods in PodTopologySpread's and InterPodAffinity's counts.

kube-scheduler's RunFilterPluginsWithNominatedPods (framework/runtime/framework.go):
for a node with nominated pods of the incoming pod's priority or higher (not the
pod itself), addGENominatedPods adds them to that node and, through each PreFilter
plugin's AddPod, to a copy of the PreFilter state; the node must pass Filter with
them and, if any were added, without them. The expected verdicts below are worked
out from that Go code: a nominated pod counts only while its own node is filtered
(not for another node of its zone), AddPod runs only for plugins whose PreFilter
did not Skip (InterPodAffinity skips a pod with no terms when no existing pod's
anti-affinity matches it), and findNodesThatPassFilters counts a node as feasible
only when both passes succeed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from podium.framework.cycle import Scheduler
from podium.framework.preemption import select_victims_on_node
from podium.kube.objects import PodInfo, parse_node, parse_pod
from podium.policy import default_profile
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot

from .builders import node, pod

HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
ZONES = {"n0": "zone-a", "n1": "zone-a", "n2": "zone-b"}
INCOMING_PRIORITY = 100


def _nodes(cpu: str = "4") -> list[dict[str, Any]]:
    return [node(n, cpu=cpu, labels={HOST: n, ZONE: z}) for n, z in ZONES.items()]


def _snap(nodes: list[dict[str, Any]], bound: list[dict[str, Any]]) -> Snapshot:
    cache = Cache()
    for body in nodes:
        cache.add_node(parse_node(body))
    for body in bound:
        cache.add_pod(parse_pod(body))
    snap = Snapshot()
    snap.update(cache)
    return snap


def _spread(key: str) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    }


def _term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def _anti(app: str, key: str) -> dict[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(app, key)]}
        }
    }


def _affinity(app: str, key: str) -> dict[str, Any]:
    return {
        "affinity": {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(app, key)]}
        }
    }


@dataclass
class Waiting:
    """A pending pod nominated to ``node``."""

    node: str
    priority: int
    labels: dict[str, str]
    spec: dict[str, Any] = field(default_factory=dict)
    namespace: str = "default"

    def info(self) -> PodInfo:
        body = pod("waiting", cpu="100m", priority=self.priority, labels=self.labels, **self.spec)
        body["metadata"]["namespace"] = self.namespace
        return parse_pod(body)


def _nominated(waiting: list[Waiting]) -> dict[str, dict[str, PodInfo]]:
    out: dict[str, dict[str, PodInfo]] = {}
    for w in waiting:
        info = w.info()
        out.setdefault(w.node, {})[info.uid] = info
    return out


def _feasible(
    incoming: dict[str, Any], waiting: list[Waiting], bound: list[dict[str, Any]]
) -> tuple[list[str], int]:
    snap = _snap(_nodes(), bound)
    pod_info = parse_pod(incoming)
    placement = Scheduler(random.Random(0)).schedule(
        default_profile(), snap, pod_info, record=True, nominated=_nominated(waiting)
    )
    names = (
        [] if placement.candidates is None else [snap.names[int(r)] for r in placement.candidates]
    )
    return sorted(names), placement.feasible


WEB, DB = {"app": "web"}, {"app": "db"}
GUARD = pod("guard", node_name="n2", labels={"app": "guard"}, **_anti("inc", HOST))
WEB_ON_N1 = pod("web-1", node_name="n1", labels=WEB)
ALL = ["n0", "n1", "n2"]

CASES = [
    # -- PodTopologySpread: DoNotSchedule, maxSkew 1, selector app=web ------------------
    pytest.param(
        _spread(HOST),
        WEB,
        [Waiting("n0", 200, WEB)],
        [],
        ["n1", "n2"],
        id="spread-host-higher-matching-counts-on-its-node",
    ),
    pytest.param(
        _spread(HOST),
        WEB,
        [Waiting("n0", 100, WEB)],
        [],
        ["n1", "n2"],
        id="spread-host-equal-priority-counts",
    ),
    pytest.param(
        _spread(HOST),
        WEB,
        [Waiting("n0", 50, WEB)],
        [],
        ALL,
        id="spread-host-lower-priority-not-counted",
    ),
    pytest.param(
        _spread(HOST),
        WEB,
        [Waiting("n0", 200, DB)],
        [],
        ALL,
        id="spread-host-not-matching-not-counted",
    ),
    pytest.param(
        _spread(ZONE),
        WEB,
        [Waiting("n0", 200, WEB)],
        [],
        ["n1", "n2"],
        id="spread-zone-counts-only-on-its-own-node-not-its-zone",
    ),
    pytest.param(
        _spread(ZONE),
        WEB,
        [Waiting("n0", 200, WEB, namespace="other")],
        [],
        ALL,
        id="spread-zone-other-namespace-not-counted",
    ),
    pytest.param(
        _spread(ZONE),
        WEB,
        [Waiting("n0", 200, WEB, _anti("web", HOST))],
        [],
        ["n1", "n2"],
        id="spread-zone-nominated-with-anti-affinity-skipped-ipa",
    ),
    # -- InterPodAffinity: the incoming pod's required anti-affinity to app=web -----------
    pytest.param(
        _anti("web", HOST),
        {},
        [Waiting("n0", 200, WEB)],
        [],
        ["n1", "n2"],
        id="anti-host-higher-matching",
    ),
    pytest.param(
        _anti("web", HOST), {}, [Waiting("n0", 50, WEB)], [], ALL, id="anti-host-lower-priority"
    ),
    pytest.param(
        _anti("web", HOST), {}, [Waiting("n0", 200, DB)], [], ALL, id="anti-host-not-matching"
    ),
    pytest.param(
        _anti("web", ZONE),
        {},
        [Waiting("n0", 200, WEB)],
        [],
        ["n1", "n2"],
        id="anti-zone-same-zone-node-unaffected",
    ),
    # -- the incoming pod's required affinity to app=web: the second pass decides ----------
    pytest.param(
        _affinity("web", HOST),
        {},
        [Waiting("n0", 200, WEB)],
        [WEB_ON_N1],
        ["n1"],
        id="affinity-host-met-only-by-nominated-fails-second-pass",
    ),
    pytest.param(
        _affinity("web", HOST),
        {},
        [Waiting("n0", 200, WEB)],
        [],
        [],
        id="affinity-host-no-pod-anywhere-without-nominated",
    ),
    pytest.param(
        _affinity("web", HOST),
        WEB,
        [Waiting("n0", 200, WEB)],
        [],
        ALL,
        id="affinity-self-match-passes-both-passes",
    ),
    pytest.param(
        _affinity("web", ZONE),
        {},
        [Waiting("n1", 200, WEB)],
        [WEB_ON_N1],
        ["n0", "n1"],
        id="affinity-zone-existing-match-both-passes",
    ),
    # -- existing (nominated) pods' required anti-affinity against the incoming pod --------
    pytest.param(
        {},
        {"app": "inc"},
        [Waiting("n0", 200, {}, _anti("inc", HOST))],
        [GUARD],
        ["n1"],
        id="existing-anti-counted-when-prefilter-not-skipped",
    ),
    pytest.param(
        {},
        {"app": "inc"},
        [Waiting("n0", 50, {}, _anti("inc", HOST))],
        [GUARD],
        ["n0", "n1"],
        id="existing-anti-lower-priority-not-counted",
    ),
    pytest.param(
        {},
        {"app": "inc"},
        [Waiting("n0", 200, {}, _anti("inc", HOST))],
        [],
        ALL,
        id="existing-anti-ignored-when-prefilter-skipped",
    ),
]


@pytest.mark.parametrize(("spec", "labels", "waiting", "bound", "expected"), CASES)
def test_filter_with_nominated_pods(
    spec: dict[str, Any],
    labels: dict[str, str],
    waiting: list[Waiting],
    bound: list[dict[str, Any]],
    expected: list[str],
) -> None:
    incoming = pod("incoming", cpu="100m", priority=INCOMING_PRIORITY, labels=labels, **spec)
    feasible, count = _feasible(incoming, waiting, bound)
    assert feasible == expected
    # findNodesThatPassFilters: only nodes that pass both passes count as feasible.
    assert count == len(expected)


def test_the_pod_itself_is_not_added() -> None:
    incoming = pod("incoming", cpu="100m", priority=INCOMING_PRIORITY, **_anti("web", HOST))
    incoming["metadata"]["labels"] = WEB
    info = parse_pod(incoming)
    snap = _snap(_nodes(), [])
    placement = Scheduler(random.Random(0)).schedule(
        default_profile(), snap, info, record=True, nominated={"n0": {info.uid: info}}
    )
    assert placement.feasible == 3


def test_edits_are_undone() -> None:
    snap = _snap(_nodes(), [WEB_ON_N1])
    before = ([dict(p) for p in snap.pods], snap.requested.copy())
    incoming = parse_pod(pod("incoming", cpu="100m", priority=INCOMING_PRIORITY, **_spread(ZONE)))
    Scheduler(random.Random(0)).schedule(
        default_profile(), snap, incoming, nominated=_nominated([Waiting("n0", 200, WEB)])
    )
    assert [dict(p) for p in snap.pods] == before[0]
    assert (snap.requested == before[1]).all()
    assert not snap.unedited


# -- SelectVictimsOnNode runs the same two passes -------------------------------------------
VICTIM_CASES = [
    pytest.param(
        _spread(HOST),
        WEB,
        [Waiting("n0", 200, WEB)],
        [],
        False,
        id="spread-nominated-on-node-still-too-skewed",
    ),
    pytest.param(
        _spread(HOST),
        WEB,
        [Waiting("n0", 50, WEB)],
        [],
        True,
        id="spread-lower-priority-nominated-ignored",
    ),
    pytest.param(
        _affinity("web", HOST),
        {},
        [Waiting("n0", 200, WEB)],
        [],
        False,
        id="affinity-met-only-by-nominated-fails-second-pass",
    ),
    pytest.param(
        {},
        {"app": "inc"},
        [Waiting("n0", 200, {}, _anti("inc", HOST))],
        [],
        True,
        id="existing-anti-ignored-when-prefilter-skipped",
    ),
    pytest.param(
        {},
        {"app": "inc"},
        [Waiting("n0", 200, {}, _anti("inc", HOST))],
        [GUARD],
        False,
        id="existing-anti-counted-when-prefilter-not-skipped",
    ),
]


@pytest.mark.parametrize(("spec", "labels", "waiting", "bound", "fits"), VICTIM_CASES)
def test_select_victims_with_nominated_pods(
    spec: dict[str, Any],
    labels: dict[str, str],
    waiting: list[Waiting],
    bound: list[dict[str, Any]],
    fits: bool,
) -> None:
    victim = pod("victim", cpu="4", priority=1, node_name="n0", labels={"app": "low"})
    snap = _snap(_nodes(cpu="4"), [victim, *bound])
    incoming = parse_pod(
        pod("incoming", cpu="1", priority=INCOMING_PRIORITY, labels=labels, **spec)
    )
    row = snap.index["n0"]
    victims, _, status = select_victims_on_node(
        default_profile(), snap, incoming, row, (), _nominated(waiting), 0.0
    )
    assert status.fits is fits
    assert [v.name for v in victims] == (["victim"] if fits else [])
    assert not snap.unedited
