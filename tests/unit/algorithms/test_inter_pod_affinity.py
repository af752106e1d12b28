"""InterPodAffinity: filtering.go and scoring.go semantics (HostnameFastPath off)."""

from __future__ import annotations

from typing import Any

import pytest

from podium.algorithms.inter_pod_affinity import (
    REASON_AFFINITY,
    REASON_ANTI,
    REASON_EXISTING_ANTI,
    InterPodAffinity,
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
    snapshot,
    unresolvable,
)

WEB = {"app": "web"}
DB = {"app": "db"}


def term(
    labels: dict[str, str] | None = None,
    key: str = ZONE,
    *,
    selector: Any = "labels",
    namespaces: list[str] | None = None,
    ns_selector: Any = "absent",
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": key}
    if selector == "labels":
        out["labelSelector"] = {"matchLabels": labels or {}}
    elif selector is not None:
        out["labelSelector"] = selector
    if namespaces is not None:
        out["namespaces"] = namespaces
    if ns_selector != "absent":
        out["namespaceSelector"] = ns_selector
    out.update(extra)
    return out


def affinity(
    required: tuple[dict[str, Any], ...] = (),
    anti: tuple[dict[str, Any], ...] = (),
    preferred: tuple[tuple[int, dict[str, Any]], ...] = (),
    preferred_anti: tuple[tuple[int, dict[str, Any]], ...] = (),
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if required or preferred:
        out["podAffinity"] = {}
        if required:
            out["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = list(required)
        if preferred:
            out["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in preferred
            ]
    if anti or preferred_anti:
        out["podAntiAffinity"] = {}
        if anti:
            out["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = list(anti)
        if preferred_anti:
            out["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in preferred_anti
            ]
    return out


def cluster() -> list[dict[str, Any]]:
    """a1, a2 in zone a; b1 in zone b; c1 without a zone; all with hostname labels."""
    return [
        node("a1", zone="a", hostname=True),
        node("a2", zone="a", hostname=True),
        node("b1", zone="b", hostname=True),
        node("c1", hostname=True),
    ]


def verdicts(a1: str = "", a2: str = "", b1: str = "", c1: str = "") -> dict[str, str]:
    return {"a1": a1, "a2": a2, "b1": b1, "c1": c1}


A, N, X = REASON_AFFINITY, REASON_ANTI, REASON_EXISTING_ANTI

FILTER = [
    pytest.param([], pod("p"), verdicts(), id="nothing-to-check"),
    pytest.param(
        [on("a1", pod("db", DB))],
        pod("p", affinity=affinity(required=(term(DB),))),
        verdicts(b1=A, c1=A),
        id="affinity-zone",
    ),
    pytest.param(
        [on("a1", pod("db", DB))],
        pod("p", affinity=affinity(required=(term(DB, HOST),))),
        verdicts(a2=A, b1=A, c1=A),
        id="affinity-hostname",
    ),
    pytest.param(
        [],
        pod("p", affinity=affinity(required=(term(DB),))),
        verdicts(A, A, A, A),
        id="affinity-no-match-anywhere",
    ),
    pytest.param(
        [],
        pod("p", WEB, affinity=affinity(required=(term(WEB),))),
        verdicts(c1=A),
        id="first-pod-matches-own-term",
    ),
    pytest.param(
        [on("c1", pod("web", WEB))],
        pod("p", WEB, affinity=affinity(required=(term(WEB),))),
        verdicts(c1=A),
        id="match-on-node-without-topology-label-does-not-count",
    ),
    pytest.param(
        [on("a1", pod("web", WEB))],
        pod("p", WEB, affinity=affinity(required=(term(WEB, HOST),))),
        verdicts(a2=A, b1=A, c1=A),
        id="first-pod-rule-off-once-a-pod-matches",
    ),
    pytest.param(
        [on("a1", pod("x", {"app": "db"})), on("b1", pod("y", {"tier": "back"}))],
        pod("p", affinity=affinity(required=(term(DB), term({"tier": "back"})))),
        verdicts(A, A, A, A),
        id="all-terms-must-match-one-pod",
    ),
    pytest.param(
        [on("a1", pod("x", {"app": "db", "tier": "back"}))],
        pod("p", affinity=affinity(required=(term(DB), term({"tier": "back"}, HOST)))),
        verdicts(a2=A, b1=A, c1=A),
        id="one-pod-matching-two-terms",
    ),
    pytest.param(
        [on("a1", pod("db", DB, namespace="other"))],
        pod("p", affinity=affinity(required=(term(DB),))),
        verdicts(A, A, A, A),
        id="affinity-other-namespace-ignored",
    ),
    pytest.param(
        [on("b1", pod("db", DB, namespace="other"))],
        pod("p", affinity=affinity(required=(term(DB, namespaces=["other"]),))),
        verdicts(a1=A, a2=A, c1=A),
        id="affinity-listed-namespace",
    ),
    pytest.param(
        [on("b1", pod("db", DB, namespace="other"))],
        pod("p", affinity=affinity(required=(term(DB, ns_selector={}),))),
        verdicts(a1=A, a2=A, c1=A),
        id="empty-namespace-selector-means-all",
    ),
    pytest.param(
        [on("b1", pod("db", DB, namespace="other"))],
        pod(
            "p", affinity=affinity(required=(term(DB, ns_selector={"matchLabels": {"team": "x"}}),))
        ),
        verdicts(a1=A, a2=A, c1=A),
        id="namespace-selector-resolved-from-labels",
    ),
    pytest.param(
        [on("b1", pod("db", DB, namespace="other"))],
        pod(
            "p", affinity=affinity(required=(term(DB, ns_selector={"matchLabels": {"team": "y"}}),))
        ),
        verdicts(A, A, A, A),
        id="namespace-selector-matching-no-namespace",
    ),
    pytest.param(
        [on("b1", pod("db", DB))],
        pod("p", affinity=affinity(required=(term(DB, ns_selector=None),))),
        verdicts(a1=A, a2=A, c1=A),
        id="null-namespace-selector-means-own-namespace",
    ),
    pytest.param(
        [on("b1", pod("db", DB))],
        pod(
            "p",
            affinity=affinity(
                required=(term(DB, namespaces=[], ns_selector={"matchLabels": {"none": "x"}}),)
            ),
        ),
        verdicts(A, A, A, A),
        id="selector-without-own-namespace",
    ),
    pytest.param(
        [on("a1", pod("web", WEB))],
        pod("p", affinity=affinity(anti=(term(WEB),))),
        verdicts(N, N),
        id="anti-zone",
    ),
    pytest.param(
        [on("a1", pod("web", WEB))],
        pod("p", affinity=affinity(anti=(term(WEB, HOST),))),
        verdicts(a1=N),
        id="anti-hostname",
    ),
    pytest.param(
        [on("c1", pod("web", WEB))],
        pod("p", affinity=affinity(anti=(term(WEB),))),
        verdicts(),
        id="anti-on-unlabelled-node",
    ),
    pytest.param(
        [on("a1", pod("web", WEB, deleting=True))],
        pod("p", affinity=affinity(anti=(term(WEB),))),
        verdicts(N, N),
        id="terminating-pods-still-count",
    ),
    pytest.param(
        [on("a1", pod("web", WEB))],
        pod("p", affinity=affinity(anti=(term(selector={}, key=ZONE),))),
        verdicts(N, N),
        id="anti-everything-selector",
    ),
    pytest.param(
        [on("a1", pod("web", WEB))],
        pod("p", affinity=affinity(anti=(term(selector=None, key=ZONE),))),
        verdicts(),
        id="anti-nil-selector-matches-nothing",
    ),
    pytest.param(
        [on("a1", pod("guard", affinity=affinity(anti=(term(WEB),))))],
        pod("p", WEB),
        verdicts(X, X),
        id="existing-anti-symmetry",
    ),
    pytest.param(
        [on("a1", pod("guard", affinity=affinity(anti=(term(WEB, HOST),))))],
        pod("p", WEB),
        verdicts(a1=X),
        id="existing-anti-hostname",
    ),
    pytest.param(
        [on("a1", pod("guard", affinity=affinity(anti=(term(WEB),))))],
        pod("p", DB),
        verdicts(),
        id="existing-anti-not-matching",
    ),
    pytest.param(
        [on("a1", pod("guard", namespace="other", affinity=affinity(anti=(term(WEB),))))],
        pod("p", WEB),
        verdicts(),
        id="existing-anti-own-namespace-only",
    ),
    pytest.param(
        [
            on(
                "a1",
                pod(
                    "guard",
                    namespace="other",
                    affinity=affinity(
                        anti=(term(WEB, ns_selector={"matchLabels": {"env": "prod"}}),)
                    ),
                ),
            )
        ],
        pod("p", WEB),
        verdicts(X, X),
        id="existing-anti-namespace-selector-on-incoming-labels",
    ),
    pytest.param(
        [on("c1", pod("guard", affinity=affinity(anti=(term(WEB),))))],
        pod("p", WEB),
        verdicts(),
        id="existing-anti-on-node-without-key",
    ),
    pytest.param(
        [on("a1", pod("guard", affinity=affinity(anti=(term({"app": "bad value!"}),))))],
        pod("p", WEB),
        verdicts(),
        id="existing-pod-with-invalid-term-ignored",
    ),
    pytest.param(
        [on("a1", pod("web", WEB)), on("b1", pod("guard", affinity=affinity(anti=(term(DB),))))],
        pod("p", DB, affinity=affinity(required=(term(WEB),), anti=(term(WEB, HOST),))),
        verdicts(a1=N, b1=A, c1=A),
        id="affinity-reported-before-anti",
    ),
    pytest.param(
        [on("a1", pod("web", WEB)), on("a2", pod("guard", affinity=affinity(anti=(term(DB),))))],
        pod("p", DB, affinity=affinity(anti=(term(WEB, HOST),))),
        verdicts(a1=N, a2=X),
        id="anti-reported-before-existing",
    ),
    pytest.param(
        [on("a1", pod("db", DB))],
        pod(
            "p",
            affinity=affinity(
                required=(
                    term(
                        selector={
                            "matchExpressions": [
                                {"key": "app", "operator": "In", "values": ["x", "db"]}
                            ]
                        }
                    ),
                )
            ),
        ),
        verdicts(b1=A, c1=A),
        id="in-expression-selector",
    ),
    pytest.param(
        [on("a1", pod("db", DB)), on("b1", pod("other", {"app": "cache"}))],
        pod(
            "p",
            affinity=affinity(
                required=(
                    term(
                        selector={
                            "matchExpressions": [
                                {"key": "app", "operator": "NotIn", "values": ["db"]}
                            ]
                        }
                    ),
                )
            ),
        ),
        verdicts(a1=A, a2=A, c1=A),
        id="notin-expression-selector",
    ),
    pytest.param(
        [on("a1", pod("db", DB))],
        pod("p", WEB, affinity=affinity(anti=(term(selector={}, matchLabelKeys=["app"]),))),
        verdicts(N, N),
        id="match-label-keys-left-to-the-api-server",
    ),
]


@pytest.mark.parametrize(("existing", "incoming", "expected"), FILTER)
def test_filter(
    existing: list[dict[str, Any]], incoming: dict[str, Any], expected: dict[str, str]
) -> None:
    snap = snapshot(
        cluster(), existing, namespaces={"other": {"team": "x"}, "default": {"env": "prod"}}
    )
    assert run_filter(InterPodAffinity(), snap, incoming) == expected


def test_unresolvable_only_for_affinity() -> None:
    snap = snapshot(
        cluster(),
        [on("a1", pod("web", WEB)), on("b1", pod("guard", affinity=affinity(anti=(term(DB),))))],
    )
    incoming = pod("p", DB, affinity=affinity(required=(term(WEB, HOST),), anti=(term(WEB, HOST),)))
    assert run_filter(InterPodAffinity(), snap, incoming) == verdicts(a1=N, a2=A, b1=A, c1=A)
    assert unresolvable(InterPodAffinity(), snap, incoming) == {"a2", "b1", "c1"}


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(
            affinity(
                required=(
                    term(
                        selector={
                            "matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]
                        }
                    ),
                )
            ),
            id="gt-operator",
        ),
        pytest.param(affinity(anti=(term({"app": "not valid"}),)), id="bad-value"),
        pytest.param(
            affinity(preferred=((1, term(selector="app=web")),)), id="selector-not-an-object"
        ),
    ],
)
def test_incoming_pod_that_does_not_parse_is_rejected(bad: dict[str, Any]) -> None:
    snap = snapshot(cluster())
    got = run_filter(InterPodAffinity(), snap, pod("p", affinity=bad))
    assert len(set(got.values())) == 1
    assert next(iter(got.values())).startswith("parsing pod: ")


SCORE = [
    pytest.param([], pod("p"), {}, None, id="nothing-skips"),
    pytest.param(
        [on("a1", pod("db", DB))],
        pod("p", affinity=affinity(preferred=((5, term(DB)),))),
        {},
        ({"a1": 5, "a2": 5, "b1": 0, "c1": 0}, {"a1": 100, "a2": 100, "b1": 0, "c1": 0}),
        id="preferred-affinity",
    ),
    pytest.param(
        [on("a1", pod("db", DB))],
        pod("p", affinity=affinity(preferred_anti=((3, term(DB)),))),
        {},
        ({"a1": -3, "a2": -3, "b1": 0, "c1": 0}, {"a1": 0, "a2": 0, "b1": 100, "c1": 100}),
        id="preferred-anti-affinity",
    ),
    pytest.param(
        [on("b1", pod("friend", affinity=affinity(required=(term(WEB),))))],
        pod("p", WEB),
        {},
        ({"a1": 0, "a2": 0, "b1": 1, "c1": 0}, {"a1": 0, "a2": 0, "b1": 100, "c1": 0}),
        id="existing-required-affinity-hard-weight-1",
    ),
    pytest.param(
        [on("b1", pod("friend", affinity=affinity(required=(term(WEB),))))],
        pod("p", WEB),
        {"hardPodAffinityWeight": 0},
        None,
        id="hard-weight-0-ignores-required",
    ),
    pytest.param(
        [on("b1", pod("friend", affinity=affinity(required=(term(WEB),))))],
        pod("p", WEB),
        {"hardPodAffinityWeight": 7},
        ({"a1": 0, "a2": 0, "b1": 7, "c1": 0}, {"a1": 0, "a2": 0, "b1": 100, "c1": 0}),
        id="hard-weight-7",
    ),
    pytest.param(
        [on("b1", pod("g", affinity=affinity(anti=(term(WEB),))))],
        pod("p", WEB),
        {},
        None,
        id="existing-required-anti-not-scored",
    ),
    pytest.param(
        [
            on("a1", pod("f", affinity=affinity(preferred=((4, term(WEB)),)))),
            on("b1", pod("g", affinity=affinity(preferred_anti=((2, term(WEB, HOST)),)))),
        ],
        pod("p", WEB),
        {},
        ({"a1": 4, "a2": 4, "b1": -2, "c1": 0}, {"a1": 100, "a2": 100, "b1": 0, "c1": 33}),
        id="existing-preferred-both-ways-truncated",
    ),
    pytest.param(
        [on("a1", pod("f", affinity=affinity(preferred=((4, term(WEB)),))))],
        pod("p", WEB),
        {"ignorePreferredTermsOfExistingPods": True},
        None,
        id="ignore-existing-preferred",
    ),
    pytest.param(
        [on("a1", pod("db", DB)), on("b1", pod("db2", DB))],
        pod(
            "p",
            affinity=affinity(
                preferred=((5, term(DB)), (2, term(DB, HOST))), preferred_anti=((1, term(DB)),)
            ),
        ),
        {},
        ({"a1": 6, "a2": 4, "b1": 6, "c1": 0}, {"a1": 100, "a2": 66, "b1": 100, "c1": 0}),
        id="terms-add-up",
    ),
    pytest.param(
        [on("a1", pod("db", DB))],
        pod("p", affinity=affinity(preferred=((5, term(DB)),), preferred_anti=((5, term(DB)),))),
        {},
        ({"a1": 0, "a2": 0, "b1": 0, "c1": 0}, {"a1": 0, "a2": 0, "b1": 0, "c1": 0}),
        id="cancelling-terms-all-zero",
    ),
    pytest.param(
        [on("a1", pod("db", DB, namespace="other"))],
        pod("p", affinity=affinity(preferred=((5, term(DB, ns_selector={})),))),
        {},
        ({"a1": 5, "a2": 5, "b1": 0, "c1": 0}, {"a1": 100, "a2": 100, "b1": 0, "c1": 0}),
        id="preferred-all-namespaces",
    ),
]


@pytest.mark.parametrize(("existing", "incoming", "args", "expected"), SCORE)
def test_score(
    existing: list[dict[str, Any]],
    incoming: dict[str, Any],
    args: dict[str, Any],
    expected: tuple[dict[str, int], dict[str, int]] | None,
) -> None:
    snap = snapshot(cluster(), existing)
    assert run_score(InterPodAffinity(args), snap, incoming) == expected


def test_existing_pod_on_unlabelled_node_is_not_scored() -> None:
    snap = snapshot(
        [node("bare"), node("z", zone="a")],
        [on("bare", pod("f", affinity=affinity(preferred=((4, term(WEB)),))))],
    )
    assert run_score(InterPodAffinity(), snap, pod("p", WEB)) is None


def test_normalization_uses_candidates_only() -> None:
    snap = snapshot(cluster(), [on("a1", pod("db", DB)), on("b1", pod("db2", DB))])
    incoming = pod("p", affinity=affinity(preferred=((5, term(DB)), (2, term(DB, HOST)))))
    assert run_score(InterPodAffinity(), snap, incoming, ["a2", "b1"]) == (
        {"a2": 5, "b1": 7},
        {"a2": 0, "b1": 100},
    )


@pytest.mark.parametrize(
    "weight",
    [
        pytest.param(-1, id="negative"),
        pytest.param(101, id="too-big"),
        pytest.param("1", id="string"),
    ],
)
def test_bad_hard_weight(weight: Any) -> None:
    with pytest.raises(ValueError):
        InterPodAffinity({"hardPodAffinityWeight": weight})


EXPLAIN = [
    pytest.param(
        [on("a1", pod("db", DB))],
        pod("p", affinity=affinity(required=(term(DB),))),
        "b1",
        "no pod matching [app in [db]] (namespace default) in topology.kubernetes.io/zone=b",
        id="affinity",
    ),
    pytest.param(
        [on("a1", pod("db", DB))],
        pod("p", affinity=affinity(required=(term(DB),))),
        "c1",
        "node has no label topology.kubernetes.io/zone (pod affinity topologyKey)",
        id="affinity-missing-key",
    ),
    pytest.param(
        [on("a1", pod("web", WEB))],
        pod("p", affinity=affinity(anti=(term(WEB),))),
        "a2",
        "pod default/web on a1 matches anti-affinity [app in [web]] (namespace default) "
        "in topology.kubernetes.io/zone=a",
        id="anti",
    ),
    pytest.param(
        [on("a1", pod("guard", affinity=affinity(anti=(term(WEB),))))],
        pod("p", WEB),
        "a2",
        "existing pod default/guard on a1 has anti-affinity against this pod "
        "(topology.kubernetes.io/zone=a)",
        id="existing",
    ),
]


@pytest.mark.parametrize(("existing", "incoming", "name", "sentence"), EXPLAIN)
def test_explain(
    existing: list[dict[str, Any]], incoming: dict[str, Any], name: str, sentence: str
) -> None:
    snap = snapshot(cluster(), existing)
    assert explain(InterPodAffinity(), snap, incoming, name) == sentence


def test_index_follows_snapshot_updates() -> None:
    """The per-snapshot pod index must see pods that arrive and leave between cycles."""
    from podium.kube.objects import parse_node, parse_pod
    from podium.state.cache import Cache
    from podium.state.snapshot import Snapshot

    cache = Cache()
    for body in cluster():
        cache.add_node(parse_node(body))
    snap = Snapshot()
    snap.update(cache)
    plugin = InterPodAffinity()
    incoming = pod("p", affinity=affinity(anti=(term(WEB),)))
    assert run_filter(plugin, snap, incoming) == verdicts()
    web = parse_pod(on("b1", pod("web", WEB)))
    cache.add_pod(web)
    snap.update(cache)
    assert run_filter(plugin, snap, incoming) == verdicts(b1=N)
    cache.remove_pod(web.uid)
    cache.add_pod(parse_pod(on("a2", pod("web2", WEB))))
    snap.update(cache)
    assert run_filter(plugin, snap, incoming) == verdicts(N, N)
    cache.add_node(parse_node(node("d1", zone="a", hostname=True)))
    snap.update(cache)
    assert run_filter(plugin, snap, incoming) == {**verdicts(N, N), "d1": N}


def test_metadata() -> None:
    assert InterPodAffinity.default_weight == 2
    assert InterPodAffinity.events == (
        ClusterEvent.ASSIGNED_POD_ADD
        | ClusterEvent.ASSIGNED_POD_UPDATE
        | ClusterEvent.ASSIGNED_POD_DELETE
        | ClusterEvent.NODE_ADD
        | ClusterEvent.NODE_LABEL
    )
