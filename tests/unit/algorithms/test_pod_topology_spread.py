"""PodTopologySpread: filtering.go and scoring.go semantics, defaults, inclusion policies."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from podium.algorithms.pod_topology_spread import (
    REASON,
    REASON_LABEL,
    PodTopologySpread,
    round_half_away,
)
from podium.framework.plugin import ClusterEvent

from .conftest import (
    HOST,
    ZONE,
    explain,
    node,
    on,
    pod,
    run_filter,
    run_score,
    selecting,
    snapshot,
    unresolvable,
)

WEB = {"app": "web"}
NOSCHED = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]


def spread(
    key: str = ZONE,
    skew: int = 1,
    when: str = "DoNotSchedule",
    selector: Any = "web",
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector == "web":
        out["labelSelector"] = {"matchLabels": WEB}
    elif selector is not None:
        out["labelSelector"] = selector
    out.update(extra)
    return out


def webs(where: dict[str, int], **kw: Any) -> list[dict[str, Any]]:
    """``n`` web pods on each named node."""
    return [
        on(name, pod(f"w-{name}-{i}", WEB, **kw)) for name, n in where.items() for i in range(n)
    ]


def zones(**extra: dict[str, Any]) -> list[dict[str, Any]]:
    """a1, a2 in zone a; b1 in zone b; c1 in zone c; n0 without a zone."""
    nodes = {
        "a1": {"zone": "a"},
        "a2": {"zone": "a"},
        "b1": {"zone": "b"},
        "c1": {"zone": "c"},
        "n0": {},
    }
    return [
        node(name, hostname=True, **{**kw, **extra.get(name, {})}) for name, kw in nodes.items()
    ]


def verdicts(
    a1: str = "", a2: str = "", b1: str = "", c1: str = "", n0: str = REASON_LABEL
) -> dict[str, str]:
    return {"a1": a1, "a2": a2, "b1": b1, "c1": c1, "n0": n0}


R, L = REASON, REASON_LABEL

FILTER = [
    pytest.param([], pod("p", WEB), verdicts(n0=""), id="no-constraints"),
    pytest.param([], pod("p", WEB, spread=[spread()]), verdicts(), id="empty-cluster-self-match"),
    pytest.param(
        webs({"a1": 2}), pod("p", WEB, spread=[spread()]), verdicts(R, R), id="crowded-zone"
    ),
    pytest.param(
        webs({"a1": 2}), pod("p", WEB, spread=[spread(skew=3)]), verdicts(), id="within-max-skew"
    ),
    pytest.param(
        webs({"a1": 1, "a2": 1, "b1": 1, "c1": 1}),
        pod("p", WEB, spread=[spread()]),
        verdicts(R, R),
        id="min-is-not-zero",
    ),
    pytest.param(
        webs({"a1": 1, "a2": 1, "b1": 1, "c1": 1}),
        pod("p", WEB, spread=[spread(minDomains=4)]),
        verdicts(R, R, R, R),
        id="min-domains-not-reached-min-is-zero",
    ),
    pytest.param(
        webs({"a1": 1, "a2": 1, "b1": 1, "c1": 1}),
        pod("p", WEB, spread=[spread(minDomains=3)]),
        verdicts(R, R),
        id="min-domains-reached",
    ),
    pytest.param(
        webs({"a1": 2, "b1": 1, "c1": 1}),
        pod("p", {"app": "other"}, spread=[spread()]),
        verdicts(),
        id="no-self-match",
    ),
    pytest.param(
        webs({"a1": 1, "b1": 2}),
        pod(
            "p",
            WEB,
            spread=[spread()],
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": ZONE, "operator": "In", "values": ["a", "b"]}
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        verdicts(b1=R),
        id="node-affinity-policy-honor-drops-zone-c",
    ),
    pytest.param(
        webs({"a1": 1, "b1": 2}),
        pod("p", WEB, spread=[spread(nodeAffinityPolicy="Ignore")], node_selector={"tier": "x"}),
        verdicts(R, R, R),
        id="node-affinity-policy-ignore",
    ),
    pytest.param(
        webs({"a1": 1, "b1": 1}),
        pod("p", WEB, spread=[spread(nodeTaintsPolicy="Honor")]),
        verdicts(),
        id="taints-policy-honor-drops-tainted-zone-c",
    ),
    pytest.param(
        webs({"a1": 1, "b1": 1}),
        pod("p", WEB, spread=[spread()]),
        verdicts(R, R, R),
        id="taints-policy-ignore-by-default",
    ),
    pytest.param(
        webs({"a1": 1, "b1": 1}),
        pod(
            "p",
            WEB,
            spread=[spread(nodeTaintsPolicy="Honor")],
            tolerations=[{"key": "dedicated", "operator": "Exists"}],
        ),
        verdicts(R, R, R),
        id="taints-policy-honor-tolerated",
    ),
    pytest.param(
        webs({"a1": 1}),
        pod("p", WEB, spread=[spread(HOST)]),
        verdicts(a1=R, n0=""),
        id="hostname-constraint",
    ),
    pytest.param(
        webs({"a1": 3}),
        pod("p", WEB, spread=[spread(), spread("rack")]),
        {**verdicts(L, L, L, L), "a1": L},
        id="second-key-missing-everywhere",
    ),
    pytest.param(
        webs({"n0": 5}),
        pod("p", WEB, spread=[spread()]),
        verdicts(),
        id="pods-on-nodes-without-key-not-counted",
    ),
    pytest.param(
        webs({"a1": 2}, namespace="other"),
        pod("p", WEB, spread=[spread()]),
        verdicts(),
        id="other-namespace-ignored",
    ),
    pytest.param(
        webs({"a1": 2}, deleting=True),
        pod("p", WEB, spread=[spread()]),
        verdicts(),
        id="terminating-ignored",
    ),
    pytest.param(
        [
            on("a1", pod("v1a", {**WEB, "version": "v1"})),
            on("a1", pod("v1b", {**WEB, "version": "v1"})),
            on("b1", pod("v2", {**WEB, "version": "v2"})),
        ],
        pod("p", {**WEB, "version": "v2"}, spread=[spread(matchLabelKeys=["version"])]),
        verdicts(b1=R),
        id="match-label-keys",
    ),
    pytest.param(
        webs({"a1": 2}),
        pod("p", WEB, spread=[spread(matchLabelKeys=["missing"])]),
        verdicts(R, R),
        id="match-label-key-absent",
    ),
    pytest.param(
        webs({"a1": 5}),
        pod("p", WEB, spread=[spread(selector={})]),
        verdicts(),
        id="empty-selector-counts-nothing",
    ),
    pytest.param(
        webs({"a1": 5}),
        pod("p", WEB, spread=[spread(selector=None)]),
        verdicts(),
        id="nil-selector-counts-nothing",
    ),
    pytest.param(
        webs({"a1": 5}),
        pod(
            "p",
            WEB,
            spread=[spread(selector={"matchExpressions": [{"key": "app", "operator": "Bogus"}]})],
        ),
        verdicts(),
        id="invalid-selector-selects-nothing",
    ),
    pytest.param(
        webs({"a1": 5}),
        pod("p", WEB, spread=[spread(when="ScheduleAnyway")]),
        verdicts(n0=""),
        id="schedule-anyway-not-filtered",
    ),
    pytest.param(
        webs({"a1": 2}),
        pod(
            "p",
            WEB,
            spread=[spread(selector={"matchExpressions": [{"key": "app", "operator": "Exists"}]})],
        ),
        verdicts(R, R),
        id="exists-selector",
    ),
]


@pytest.mark.parametrize(("existing", "incoming", "expected"), FILTER)
def test_filter(
    existing: list[dict[str, Any]], incoming: dict[str, Any], expected: dict[str, str]
) -> None:
    snap = snapshot(zones(c1={"taints": NOSCHED}), existing)
    assert run_filter(PodTopologySpread(), snap, incoming) == expected


def test_first_failing_constraint_wins() -> None:
    nodes = [
        node("x", {ZONE: "b"}),
        node("y", {ZONE: "c"}),
        node("b1", {ZONE: "b", "rack": "r1"}),
        node("c1", {ZONE: "c", "rack": "r2"}),
    ]
    snap = snapshot(nodes, webs({"b1": 2}))
    incoming = pod("p", WEB, spread=[spread(), spread("rack")])
    # Domains come from b1 and c1 only (the nodes with both keys): zone b=2, c=0.
    # x lacks rack but already fails the zone constraint, which comes first.
    assert run_filter(PodTopologySpread(), snap, incoming) == {"x": R, "y": L, "b1": R, "c1": ""}
    assert unresolvable(PodTopologySpread(), snap, incoming) == {"y"}


def cluster3() -> list[dict[str, Any]]:
    return [
        node("a1", zone="a", hostname=True),
        node("a2", zone="a", hostname=True),
        node("b1", zone="b", hostname=True),
    ]


RS = ("ReplicaSet", "rs-1")
# The objects DefaultSelector reads: rs-1 and the Service both select app=web.
RS_WEB = [selecting("ReplicaSet", "rs-1", {"matchLabels": WEB})]
SVC_WEB = [selecting("Service", "web", WEB)]
# Three WEB pods of rs-1: one in zone a (a1), two in zone b (b1).
RS_PODS = [
    on("a1", pod("x", WEB, owner=RS)),
    on("b1", pod("y", WEB, owner=RS)),
    on("b1", pod("z", WEB, owner=RS)),
]
# With them, system defaults score a1 = 1*log(5)+2 + 1*log(4)+4 = 9, a2 = 2+5.39 = 7,
# b1 = 2*log(5)+2 + 2*log(4)+4 = 12 (hostname over 3 nodes, zone over 2 domains).
SYSTEM = ({"a1": 9, "a2": 7, "b1": 12}, {"a1": 83, "a2": 100, "b1": 58})

SCORE = [
    pytest.param(
        cluster3(),
        webs({"a1": 2, "b1": 1}),
        pod("p", WEB, spread=[spread(when="ScheduleAnyway")]),
        {},
        [],
        ({"a1": 3, "a2": 3, "b1": 1}, {"a1": 33, "a2": 33, "b1": 100}),
        id="zone-soft-constraint",
    ),
    pytest.param(
        [*cluster3(), node("n0", hostname=True)],
        webs({"a1": 2, "b1": 1}),
        pod("p", WEB, spread=[spread(when="ScheduleAnyway")]),
        {},
        [],
        ({"a1": 3, "a2": 3, "b1": 1, "n0": 0}, {"a1": 33, "a2": 33, "b1": 100, "n0": 0}),
        id="node-without-key-ignored",
    ),
    pytest.param(
        cluster3(),
        [],
        pod("p", WEB, spread=[spread(when="ScheduleAnyway", skew=1)]),
        {},
        [],
        ({"a1": 0, "a2": 0, "b1": 0}, {"a1": 100, "a2": 100, "b1": 100}),
        id="all-zero-all-max",
    ),
    pytest.param(
        cluster3(),
        webs({"a1": 1}),
        pod("p", WEB, spread=[spread(HOST, when="ScheduleAnyway", skew=2)]),
        {},
        [],
        # hostname: size 3, weight log(5); a1 = 1.609 + 1 -> 3, others 1.
        ({"a1": 3, "a2": 1, "b1": 1}, {"a1": 33, "a2": 100, "b1": 100}),
        id="hostname-soft-constraint",
    ),
    pytest.param(
        cluster3(), RS_PODS, pod("p", WEB, owner=RS), {}, RS_WEB, SYSTEM, id="system-by-replicaset"
    ),
    pytest.param(
        cluster3(),
        webs({"a1": 1, "b1": 2}),
        pod("p", WEB),
        {},
        SVC_WEB,
        SYSTEM,
        id="system-by-service-without-owner",
    ),
    pytest.param(
        [*cluster3(), node("n0", hostname=True)],
        RS_PODS,
        pod("p", WEB, owner=RS),
        {},
        RS_WEB,
        ({"a1": 9, "a2": 8, "b1": 13, "n0": 2}, {"a1": 46, "a2": 53, "b1": 15, "n0": 100}),
        id="system-defaults-keep-nodes-without-zone",
    ),
    pytest.param(
        cluster3(),
        [on("a1", pod("x", WEB, owner=("ReplicaSet", "other"))), on("b1", pod("y", owner=RS))],
        pod("p", WEB, owner=RS),
        {},
        RS_WEB,
        # The selector counts x (another owner, app=web), not y (same owner, no label):
        # a1 = log(5)+2 + log(4)+4 = 9, a2 = 2 + 5.39 = 7, b1 = 2 + 4 = 6.
        ({"a1": 9, "a2": 7, "b1": 6}, {"a1": 66, "a2": 88, "b1": 100}),
        id="system-counts-selected-pods-not-siblings",
    ),
    pytest.param(
        cluster3(), RS_PODS, pod("p", WEB), {}, [], None, id="system-needs-a-selecting-object"
    ),
    pytest.param(
        cluster3(),
        RS_PODS,
        pod("p", WEB, owner=("Job", "j")),
        {},
        RS_WEB,
        None,
        id="job-owner-gets-no-defaults",
    ),
    pytest.param(
        cluster3(),
        RS_PODS,
        pod("p", WEB, owner=RS, owner_api="apps/v1beta2"),
        {},
        RS_WEB,
        None,
        id="owner-api-version-must-match",
    ),
    pytest.param(
        cluster3(),
        RS_PODS,
        pod("p", WEB, owner=RS, spread=[spread()]),
        {},
        RS_WEB,
        None,
        id="own-hard-constraints-replace-defaults",
    ),
    pytest.param(
        cluster3(),
        RS_PODS,
        pod("p", WEB, owner=RS),
        {"defaultingType": "List", "defaultConstraints": []},
        RS_WEB,
        None,
        id="list-defaulting-without-constraints",
    ),
    pytest.param(
        [*cluster3(), node("n0", hostname=True)],
        [on("a1", pod("x", WEB, owner=RS))],
        pod("p", WEB, owner=RS),
        {
            "defaultingType": "List",
            "defaultConstraints": [spread(when="ScheduleAnyway", selector=None)],
        },
        RS_WEB,
        # zone domains a, b: weight log(4); a = 1.386 -> 1; List defaulting ignores n0.
        ({"a1": 1, "a2": 1, "b1": 0, "n0": 0}, {"a1": 0, "a2": 0, "b1": 100, "n0": 0}),
        id="list-defaulting",
    ),
]


@pytest.mark.parametrize(("nodes", "existing", "incoming", "args", "objects", "expected"), SCORE)
def test_score(
    nodes: list[dict[str, Any]],
    existing: list[dict[str, Any]],
    incoming: dict[str, Any],
    args: dict[str, Any],
    objects: list[dict[str, Any]],
    expected: tuple[dict[str, int], dict[str, int]] | None,
) -> None:
    snap = snapshot(nodes, existing, selectors=objects)
    assert run_score(PodTopologySpread(args), snap, incoming) == expected


def test_score_counts_over_all_nodes_but_domains_from_candidates() -> None:
    snap = snapshot([*cluster3(), node("c1", zone="c", hostname=True)], webs({"a1": 2, "c1": 4}))
    incoming = pod("p", WEB, spread=[spread(when="ScheduleAnyway")])
    # Candidates a2, b1: zone domains {a, b} (size 2, weight log 4); zone c is not a domain.
    w = math.log(4)
    a2 = math.floor(2 * w + 0.5)
    assert run_score(PodTopologySpread(), snap, incoming, ["a2", "b1"]) == (
        {"a2": a2, "b1": 0},
        {"a2": 100 * (a2 + 0 - a2) // a2, "b1": 100},
    )


LIST_HARD = {"defaultingType": "List", "defaultConstraints": [spread(selector=None)]}


@pytest.mark.parametrize(
    ("existing", "objects", "incoming", "expected"),
    [
        pytest.param(
            [on("a1", pod("x", WEB, owner=RS)), on("a1", pod("y", WEB, owner=RS))],
            RS_WEB,
            pod("p", WEB, owner=RS),
            {"a1": R, "a2": R, "b1": ""},
            id="replicaset",
        ),
        pytest.param(
            webs({"a1": 2}), SVC_WEB, pod("p", WEB), {"a1": R, "a2": R, "b1": ""}, id="service"
        ),
        pytest.param(
            webs({"a1": 2}),
            SVC_WEB,
            pod("q", {"app": "db"}),
            {"a1": "", "a2": "", "b1": ""},
            id="not-selected",
        ),
        pytest.param(
            webs({"a1": 2}),
            [],
            pod("p", WEB),
            {"a1": "", "a2": "", "b1": ""},
            id="no-objects",
        ),
    ],
)
def test_default_list_constraints_filter(
    existing: list[dict[str, Any]],
    objects: list[dict[str, Any]],
    incoming: dict[str, Any],
    expected: dict[str, str],
) -> None:
    snap = snapshot(cluster3(), existing, selectors=objects)
    assert run_filter(PodTopologySpread(LIST_HARD), snap, incoming) == expected


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(
            {"defaultingType": "System", "defaultConstraints": [spread()]}, id="system-with-list"
        ),
        pytest.param({"defaultingType": "Other"}, id="unknown-type"),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [spread(selector="web")]},
            id="selector-in-default",
        ),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [spread(skew=0, selector=None)]},
            id="zero-skew",
        ),
        pytest.param(
            {
                "defaultingType": "List",
                "defaultConstraints": [spread(selector=None), spread(selector=None)],
            },
            id="duplicate",
        ),
    ],
)
def test_bad_args(args: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        PodTopologySpread(args)


@pytest.mark.parametrize(
    ("value", "rounded"),
    [
        pytest.param(0.5, 1, id="half"),
        pytest.param(1.5, 2, id="one-and-a-half"),
        pytest.param(2.5, 3, id="two-and-a-half-not-even"),
        pytest.param(2.4999999999999996, 2, id="just-below-half"),
        pytest.param(0.49999999999999994, 0, id="largest-below-half"),
        pytest.param(-0.5, -1, id="negative-half"),
        pytest.param(7.0, 7, id="whole"),
    ],
)
def test_round_half_away(value: float, rounded: int) -> None:
    assert int(round_half_away(np.array([value]))[0]) == rounded


def test_explain() -> None:
    snap = snapshot(zones(), webs({"a1": 2}))
    incoming = pod("p", WEB, spread=[spread()])
    plugin = PodTopologySpread()
    assert explain(plugin, snap, incoming, "a2") == (
        "topology.kubernetes.io/zone=a has 2 matching pod(s) + this pod, the minimum over "
        "3 domain(s) is 0: skew 3 > maxSkew 1"
    )
    assert explain(plugin, snap, incoming, "n0") == "node has no label topology.kubernetes.io/zone"


def test_metadata() -> None:
    assert PodTopologySpread.default_weight == 2
    assert PodTopologySpread.events == (
        ClusterEvent.ASSIGNED_POD_ADD
        | ClusterEvent.ASSIGNED_POD_UPDATE
        | ClusterEvent.ASSIGNED_POD_DELETE
        | ClusterEvent.NODE_ADD
        | ClusterEvent.NODE_DELETE
        | ClusterEvent.NODE_LABEL
        | ClusterEvent.NODE_TAINT
    )
