"""SelectorStore and its wiring: parsing never raises, prime and resync, no requeue."""

from __future__ import annotations

from typing import Any, cast

import pytest

from podium.framework.plugin import ClusterEvent
from podium.kube.objects import parse_pod
from podium.policy import default_profile
from podium.scheduling.binder import Binder
from podium.scheduling.scheduler import PodiumScheduler
from podium.state.selectors import KINDS, SelectorStore, parse_selector
from tests.unit.algorithms.conftest import pod, selecting

WEB = {"app": "web"}

MALFORMED = [
    pytest.param("services", {"metadata": {"name": "s"}, "spec": "x"}, id="spec-str"),
    pytest.param("services", {"metadata": {"name": "s"}, "spec": {"selector": [1]}}, id="list"),
    pytest.param(
        "replicasets",
        {"metadata": {"name": "r"}, "spec": {"selector": {"matchLabels": "app"}}},
        id="match-labels-str",
    ),
    pytest.param(
        "statefulsets",
        {"metadata": {"name": "s"}, "spec": {"selector": {"matchExpressions": [None]}}},
        id="expression-none",
    ),
    pytest.param("replicationcontrollers", {"metadata": None}, id="no-name"),
    pytest.param("deployments", {"metadata": {"name": "d"}}, id="unknown-kind"),
]


@pytest.mark.parametrize(("kind", "body"), MALFORMED)
def test_malformed_objects_do_not_raise(kind: str, body: dict[str, Any]) -> None:
    store = SelectorStore()
    store.apply(kind, "ADDED", body)
    assert store.default_selector(parse_pod(pod("p", WEB))).empty


def test_parsed_selectors() -> None:
    service = parse_selector("services", selecting("Service", "s", {"app": 1}))
    assert service.labels == {"app": "1"}
    assert parse_selector("services", selecting("Service", "s", None)).labels is None
    invalid = parse_selector(
        "replicasets", selecting("ReplicaSet", "r", {"matchLabels": {"bad key!": "x"}})
    )
    assert invalid.selector.nothing
    assert parse_selector("replicasets", selecting("ReplicaSet", "r", {})).selector.empty


class _Client:
    """A LIST endpoint per path; any other path lists nothing."""

    def __init__(self, items: dict[str, list[dict[str, Any]]]) -> None:
        self.items = items

    async def get(
        self, path: str, params: dict[str, str] | None = None, accept: str | None = None
    ) -> dict[str, Any]:
        return {"metadata": {"resourceVersion": "10"}, "items": self.items.get(path, [])}


def _scheduler() -> PodiumScheduler:
    binder = cast(Binder, type("NoBinder", (), {"client": None, "instance": ""})())
    return PodiumScheduler(binder, {"podium": default_profile("podium")})


async def test_prime_lists_them_and_a_resync_forgets_the_gone_ones() -> None:
    scheduler = _scheduler()
    web = selecting("Service", "web", WEB)
    rs = selecting("ReplicaSet", "rs-1", {"matchLabels": WEB})
    await scheduler.prime(
        _Client({KINDS["services"]: [web], KINDS["replicasets"]: [rs]})  # type: ignore[arg-type]
    )
    incoming = parse_pod(pod("p", WEB, owner=("ReplicaSet", "rs-1")))
    store = scheduler.snapshot.selectors
    assert len(store.default_selector(incoming).requirements or ()) == 2
    assert scheduler.cached_versions("services") == {"default/web": "1"}

    assert scheduler.resync.reconcile("services", set(), "10") == ["default/web"]
    assert scheduler.resync.reconcile("replicasets", {"default/rs-1"}, "10") == []
    assert [r.describe() for r in store.default_selector(incoming).requirements or ()] == [
        "app in [web]"
    ]


def test_selector_events_requeue_nothing() -> None:
    scheduler = _scheduler()
    seen: list[ClusterEvent] = []
    scheduler.queue.on_event = seen.append  # type: ignore[method-assign]
    for event in ("ADDED", "MODIFIED", "DELETED"):
        scheduler.on_selector("services", event, selecting("Service", "web", WEB))
    assert seen == []
