"""VolumeStore: parsing never raises, events never go back in time, resync keys."""

from __future__ import annotations

from typing import Any

import pytest

from podium.state.volumes import VolumeStore, parse_csinode, parse_pv, parse_pvc

# (kind, malformed body) — each parses into something, and the store keeps it or drops it.
MALFORMED = [
    pytest.param("persistentvolumes", {"metadata": {"name": "p"}, "spec": "x"}, id="pv-spec-str"),
    pytest.param(
        "persistentvolumes",
        {"metadata": {"name": "p"}, "spec": {"capacity": {"storage": "lots"}, "nodeAffinity": 3}},
        id="pv-bad-quantity-and-affinity",
    ),
    pytest.param(
        "persistentvolumeclaims",
        {
            "metadata": {"name": "c", "annotations": None},
            "spec": {"selector": 5, "accessModes": "RWO"},
        },
        id="pvc-bad-selector",
    ),
    pytest.param("storageclasses", {"metadata": {"name": "s"}, "allowedTopologies": {}}, id="sc"),
    pytest.param(
        "csinodes",
        {"metadata": {"name": "n"}, "spec": {"drivers": [None, {"name": 1}]}},
        id="csinode",
    ),
    pytest.param("csinodes", {"metadata": None}, id="no-name"),
]


@pytest.mark.parametrize(("kind", "body"), MALFORMED)
def test_malformed_objects_do_not_raise(kind: str, body: dict[str, Any]) -> None:
    VolumeStore().apply(kind, "ADDED", body)


def test_parsed_fields() -> None:
    pv = parse_pv(
        {
            "metadata": {
                "name": "p",
                "annotations": {"volume.beta.kubernetes.io/storage-class": "old"},
            },
            "spec": {
                "capacity": {"storage": "1Gi"},
                "storageClassName": "new",
                "csi": {"driver": "d", "volumeHandle": "h"},
            },
            "status": {"phase": "Available"},
        }
    )
    assert (pv.storage_class, pv.capacity, pv.csi_driver, pv.csi_handle, pv.phase) == (
        "old",
        2**30,
        "d",
        "h",
        "Available",
    )
    claim = parse_pvc(
        {
            "metadata": {"name": "c", "namespace": "n"},
            "spec": {"resources": {"requests": {"storage": "2G"}}},
        }
    )
    assert (claim.key, claim.request, claim.volume_mode, claim.fully_bound) == (
        "n/c",
        2 * 10**9,
        "Filesystem",
        False,
    )
    assert parse_csinode(
        {
            "metadata": {"name": "n"},
            "spec": {"drivers": [{"name": "a", "allocatable": {"count": 3}}, {"name": "b"}]},
        }
    ).limits == {"a": 3}


def test_an_older_event_does_not_replace_a_newer_write() -> None:
    store = VolumeStore()
    new = {"metadata": {"name": "p", "resourceVersion": "20"}, "spec": {"claimRef": {"name": "c"}}}
    old = {"metadata": {"name": "p", "resourceVersion": "10"}, "spec": {}}
    assert store.apply("persistentvolumes", "MODIFIED", new)
    assert not store.apply("persistentvolumes", "MODIFIED", old)
    assert store.pvs["p"].claim_ref is not None


def test_cached_versions_key_claims_by_namespace() -> None:
    store = VolumeStore()
    store.apply(
        "persistentvolumeclaims",
        None,
        {"metadata": {"name": "c", "namespace": "n", "resourceVersion": "7"}},
    )
    store.apply(
        "persistentvolumeclaims", "DELETED", {"metadata": {"name": "gone", "namespace": "n"}}
    )
    assert store.cached_versions("persistentvolumeclaims") == {"n/c": "7"}
