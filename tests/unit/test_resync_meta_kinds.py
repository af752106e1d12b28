"""Namespaces and PodDisruptionBudgets deleted during a watch gap are forgotten by the resync."""

from __future__ import annotations

from typing import Any, cast

import pytest

from podium.policy import default_profile
from podium.scheduling.binder import Binder
from podium.scheduling.scheduler import PodiumScheduler


def _scheduler() -> PodiumScheduler:
    binder = cast(Binder, type("NoBinder", (), {"client": None, "instance": ""})())
    return PodiumScheduler(binder, {"podium": default_profile("podium")})


def _pdb(name: str, version: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "shop", "name": name, "resourceVersion": version},
        "spec": {"selector": {"matchLabels": {"app": name}}},
        "status": {"disruptionsAllowed": 1},
    }


def _namespace(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version, "labels": {"team": name}}}


@pytest.mark.parametrize(
    ("kind", "body", "held", "key"),
    [
        ("poddisruptionbudgets", _pdb, lambda s: s.pdbs, "shop/{}"),
        ("namespaces", _namespace, lambda s: s.snapshot.namespace_labels, "{}"),
    ],
)
async def test_gone_from_the_list_and_no_newer_than_it_is_forgotten(
    kind: str, body: Any, held: Any, key: str
) -> None:
    scheduler = _scheduler()
    apply = scheduler.on_pdb if kind == "poddisruptionbudgets" else scheduler.on_namespace
    apply(None, body("gone", "5"))
    apply(None, body("kept", "6"))
    apply(None, body("newer", "12"))  # delivered by the watch after the list was taken
    removed = scheduler.resync.reconcile(kind, {key.format("kept")}, "10")
    assert removed == [key.format("gone")]
    assert set(held(scheduler)) == {key.format("kept"), key.format("newer")}
    assert scheduler.cached_versions(kind) == {key.format("kept"): "6", key.format("newer"): "12"}


async def test_deleted_events_drop_the_versions_too() -> None:
    scheduler = _scheduler()
    scheduler.on_pdb(None, _pdb("a", "5"))
    scheduler.on_namespace(None, _namespace("shop", "7"))
    scheduler.on_pdb("DELETED", _pdb("a", "8"))
    scheduler.on_namespace("DELETED", _namespace("shop", "9"))
    assert scheduler.cached_versions("poddisruptionbudgets") == {}
    assert scheduler.cached_versions("namespaces") == {}
    assert scheduler.pdbs == {} and scheduler.snapshot.namespace_labels == {}
