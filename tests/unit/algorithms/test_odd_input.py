"""No plugin raises on malformed affinity, spread constraints, volumes, ports or images."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from podium.algorithms import FILTERS, SCORES
from podium.framework.plugin import FilterPlugin, ScorePlugin

from .conftest import cycle, node, on, pod, snapshot

NEW = (
    "NodeAffinity",
    "NodePorts",
    "InterPodAffinity",
    "PodTopologySpread",
    "ImageLocality",
    "NoDiskConflict",
    "NodePreferAvoidPods",
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["", "a", "In", "NotIn", "Exists", "Gt", "Lt", "x y", "10", "-1", "zone"]),
)
junk = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "key", "operator", "values", "matchExpressions", "matchFields", "matchLabels",
                    "labelSelector", "topologyKey", "namespaces", "namespaceSelector", "weight",
                    "podAffinityTerm", "preference", "nodeSelectorTerms", "maxSkew", "minDomains",
                    "whenUnsatisfiable", "matchLabelKeys", "nodeAffinityPolicy", "nodeTaintsPolicy",
                    "requiredDuringSchedulingIgnoredDuringExecution",
                    "preferredDuringSchedulingIgnoredDuringExecution",
                ]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=12,
)  # fmt: skip
affinity = st.fixed_dictionaries(
    {},
    optional={"nodeAffinity": junk, "podAffinity": junk, "podAntiAffinity": junk},
)
volumes = st.lists(
    st.dictionaries(
        st.sampled_from(["gcePersistentDisk", "awsElasticBlockStore", "iscsi", "rbd", "image"]),
        junk,
    ),
    max_size=2,
)


def _with(
    body: dict[str, Any], aff: dict[str, Any], spread: Any, vols: list[Any]
) -> dict[str, Any]:
    body["spec"]["affinity"] = aff
    body["spec"]["topologySpreadConstraints"] = spread if isinstance(spread, list) else [spread]
    body["spec"]["volumes"] = vols
    return body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(aff=affinity, spread=junk, vols=volumes, existing_aff=affinity, existing_spread=junk)
def test_plugins_never_raise(
    aff: dict[str, Any],
    spread: Any,
    vols: list[Any],
    existing_aff: dict[str, Any],
    existing_spread: Any,
) -> None:
    nodes = [
        node("a", zone="a", hostname=True, images={"pause": 50 << 20}),
        node("b", {"cores": "x"}),
    ]
    existing = on("a", _with(pod("old", {"app": "web"}), existing_aff, existing_spread, vols))
    snap = snapshot(nodes, [existing])
    incoming = _with(pod("new", {"app": "web"}, owner=("ReplicaSet", "rs")), aff, spread, vols)
    for name in NEW:
        c = cycle(snap, incoming)
        everything = snap.all_nodes()
        plugin_cls = FILTERS.get(name) or SCORES[name]
        plugin = plugin_cls()
        if isinstance(plugin, FilterPlugin):
            result = plugin.pre_filter(c)
            if result is None or not result.reject:
                for rejection in plugin.filter(c, everything):
                    assert rejection.mask.shape == everything.shape
                for row in everything:
                    assert isinstance(plugin.explain(c, int(row)), str)
        if isinstance(plugin, ScorePlugin) and plugin.pre_score(c, everything):
            raw = plugin.score(c, everything)
            out = plugin.normalize(c, everything, raw)
            assert out.dtype == np.int64 and out.shape == everything.shape


@pytest.mark.parametrize("name", NEW)
def test_registered(name: str) -> None:
    assert name in FILTERS or name in SCORES
