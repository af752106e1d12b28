"""SelectorStore.default_selector: helper.DefaultSelector from spread.go, case by case."""

from __future__ import annotations

from typing import Any

import pytest

from podium.kube.objects import parse_pod
from podium.state.selectors import SelectorStore

from .conftest import pod, selecting

WEB = {"app": "web"}
RS = ("ReplicaSet", "rs-1")
STS = ("StatefulSet", "db")
RC = ("ReplicationController", "rc-1")


def svc(name: str, selector: Any, namespace: str = "default") -> dict[str, Any]:
    return selecting("Service", name, selector, namespace)


def match(labels: dict[str, str]) -> dict[str, Any]:
    return {"matchLabels": labels}


def with_refs(body: dict[str, Any], *refs: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["ownerReferences"] = list(refs)
    return body


def ref(kind: str, name: str, api: str = "apps/v1", controller: bool | None = True) -> Any:
    out = {"apiVersion": api, "kind": kind, "name": name, "uid": f"uid-{name}"}
    if controller is not None:
        out["controller"] = controller
    return out


CASES = [
    pytest.param([svc("web", WEB)], pod("p", WEB), ["app in [web]"], id="service-only"),
    pytest.param(
        [selecting("ReplicaSet", "rs-1", match(WEB))],
        pod("p", WEB, owner=RS),
        ["app in [web]"],
        id="replicaset-only",
    ),
    pytest.param(
        [
            svc("web", WEB),
            svc("tier", {"tier": "front"}),
            selecting(
                "ReplicaSet",
                "rs-1",
                {
                    "matchLabels": {"hash": "abc"},
                    "matchExpressions": [{"key": "env", "operator": "Exists"}],
                },
            ),
        ],
        pod("p", {**WEB, "tier": "front", "hash": "abc", "env": "prod"}, owner=RS),
        # Services first as one sorted label set, then the ReplicaSet's requirements.
        ["app in [web]", "tier in [front]", "hash in [abc]", "env Exists"],
        id="union-of-services-and-replicaset",
    ),
    pytest.param(
        [svc("web", WEB), selecting("ReplicaSet", "rs-1", match(WEB))],
        pod("p", WEB, owner=RS),
        ["app in [web]", "app in [web]"],
        id="same-label-twice-is-harmless",
    ),
    pytest.param(
        [
            selecting(
                "StatefulSet",
                "db",
                {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "cache"]}]},
            )
        ],
        pod("p", {"app": "db"}, owner=STS),
        ["app in [cache, db]"],
        id="statefulset-match-expressions",
    ),
    pytest.param(
        [svc("web", WEB), selecting("ReplicationController", "rc-1", {"app": "web", "v": "2"})],
        pod("p", WEB, owner=RC),
        ["app in [web]", "v in [2]"],
        id="replicationcontroller-map-merged-need-not-match-pod",
    ),
    pytest.param([svc("web", WEB, "other")], pod("p", WEB), [], id="service-in-other-namespace"),
    pytest.param(
        [selecting("ReplicaSet", "rs-1", match(WEB), "other")],
        pod("p", WEB, owner=RS),
        [],
        id="controller-in-other-namespace",
    ),
    pytest.param(
        [svc("db", {"app": "db"}), svc("two", {"app": "web", "tier": "back"})],
        pod("p", WEB),
        [],
        id="non-matching-services",
    ),
    pytest.param([], pod("p", WEB, owner=RS), [], id="none"),
    pytest.param([svc("web", None)], pod("p", WEB), [], id="service-without-selector"),
    pytest.param([svc("all", {})], pod("p", WEB), [], id="service-empty-selector"),
    pytest.param(
        [selecting("ReplicaSet", "rs-1", None)],
        pod("p", WEB, owner=RS),
        [],
        id="replicaset-without-selector",
    ),
    pytest.param(
        [
            svc("web", WEB),
            selecting(
                "ReplicaSet", "rs-1", {"matchExpressions": [{"key": "app", "operator": "Near"}]}
            ),
        ],
        pod("p", WEB, owner=RS),
        ["app in [web]"],
        id="invalid-replicaset-selector-left-out",
    ),
    pytest.param(
        [selecting("ReplicaSet", "rs-1", match(WEB))],
        pod("p", WEB, owner=RS, owner_api="apps/v1beta2"),
        [],
        id="owner-api-version-must-match",
    ),
    pytest.param(
        [selecting("ReplicaSet", "rs-1", match(WEB))],
        pod("p", WEB, owner=("Deployment", "rs-1")),
        [],
        id="other-controller-kind",
    ),
    pytest.param(
        [selecting("ReplicaSet", "rs-1", match(WEB))],
        with_refs(pod("p", WEB), ref("ReplicaSet", "rs-1", controller=False)),
        [],
        id="owner-that-is-not-controller",
    ),
    pytest.param(
        [
            selecting("ReplicaSet", "rs-1", match(WEB)),
            selecting("StatefulSet", "db", match({"role": "db"})),
        ],
        with_refs(
            pod("p", WEB),
            ref("ReplicaSet", "rs-1", controller=None),
            ref("StatefulSet", "db"),
            ref("ReplicaSet", "rs-1"),
        ),
        ["role in [db]"],
        id="first-controller-ref-only",
    ),
    pytest.param(
        [selecting("ReplicationController", "rc-1", WEB)],
        with_refs(pod("p", WEB), ref("ReplicationController", "rc-1", api="/v1")),
        ["app in [web]"],
        id="api-version-slash-v1-is-core-v1",
    ),
    pytest.param(
        [selecting("ReplicaSet", "rs-1", match(WEB))],
        with_refs(pod("p", WEB), ref("ReplicaSet", "rs-1", api="apps/v1/x")),
        [],
        id="unparsable-api-version",
    ),
]


@pytest.mark.parametrize(("objects", "incoming", "expected"), CASES)
def test_default_selector(
    objects: list[dict[str, Any]], incoming: dict[str, Any], expected: list[str]
) -> None:
    store = SelectorStore()
    store.load(objects)
    selector = store.default_selector(parse_pod(incoming))
    assert selector.requirements is not None
    assert [r.describe() for r in selector.requirements] == expected
    assert selector.empty == (not expected)


def test_controller_is_found_by_name_in_the_pods_namespace() -> None:
    store = SelectorStore()
    store.load([selecting("ReplicaSet", "rs-1", match(WEB), "team")])
    incoming = parse_pod(pod("p", {"app": "other"}, namespace="team", owner=RS))
    # The ReplicaSet does not select the pod; kube-scheduler follows the reference anyway.
    assert not store.default_selector(incoming).matches(incoming.labels)
    assert store.default_selector(incoming).matches(WEB)


def test_deleted_objects_stop_counting() -> None:
    store = SelectorStore()
    store.load([svc("web", WEB)])
    incoming = parse_pod(pod("p", WEB))
    assert not store.default_selector(incoming).empty
    store.apply("services", "DELETED", {"metadata": {"name": "web", "namespace": "default"}})
    assert store.default_selector(incoming).empty
    assert store.tables["services"] == {}
