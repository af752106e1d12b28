"""ImageLocality: imagelocality.go thresholds, spread and integer arithmetic."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from podium.algorithms.image_locality import ImageLocality, calculate_priority
from podium.framework.plugin import ClusterEvent

from .conftest import node, pod, run_score, snapshot

MB = 1024 * 1024

# (images per node n1..n3, the pod, expected raw score per node); no normalization.
CASES = [
    pytest.param(
        [{"nginx:1.25": 500 * MB}, {}, {}],
        pod("p", image="nginx:1.25"),
        {"n1": 14, "n2": 0, "n3": 0},
        id="one-node-of-three",  # int(500MiB / 3) = 174762666 -> 100 * (. - 23MiB) / 977MiB
    ),
    pytest.param(
        # Node names are kept as reported (kubelets report tags); the pod's are normalised.
        [{"nginx:latest": 2000 * MB}, {"nginx:latest": 2000 * MB}, {"nginx:latest": 2000 * MB}],
        pod("p", image="nginx"),
        {"n1": 100, "n2": 100, "n3": 100},
        id="untagged-means-latest-clamped-to-max",
    ),
    pytest.param(
        [{"small:1": 10 * MB}, {"small:1": 10 * MB}, {"small:1": 10 * MB}],
        pod("p", image="small:1"),
        {"n1": 0, "n2": 0, "n3": 0},
        id="below-23MiB-is-zero",
    ),
    pytest.param(
        [{"a:1": 600 * MB, "b:1": 600 * MB}] * 3,
        pod("p", image="a:1", init_images=["b:1"]),
        {"n1": 59, "n2": 59, "n3": 59},
        id="init-container-counts",  # 1200MiB of 2000MiB max
    ),
    pytest.param(
        [{"a:1": 600 * MB}] * 3,
        pod("p", image="a:1", extra_images=["a:1"]),
        {"n1": 59, "n2": 59, "n3": 59},
        id="same-image-twice-counts-twice",
    ),
    pytest.param(
        [{"a:1": 800 * MB}] * 3,
        pod("p", image="a:1", volumes=[{"name": "v", "image": {"reference": "data:1"}}]),
        {"n1": 39, "n2": 39, "n3": 39},
        id="image-volume-raises-the-maximum",
    ),
    pytest.param(
        [{"a:1": 800 * MB}] * 3,
        pod("p", image=None),
        {"n1": 0, "n2": 0, "n3": 0},
        id="container-without-image",
    ),
    pytest.param(
        [{"a:1": 800 * MB}] * 3,
        pod("p", image="a:2"),
        {"n1": 0, "n2": 0, "n3": 0},
        id="other-tag",
    ),
    pytest.param(
        [{"repo/app@sha256:abc": 800 * MB}, {}, {}],
        pod("p", image="repo/app@sha256:abc"),
        {"n1": 24, "n2": 0, "n3": 0},
        id="digest-name",  # int(800MiB/3) = 279620266
    ),
    pytest.param(
        [{"localhost:5000/app:latest": 900 * MB}] * 3,
        pod("p", image="localhost:5000/app"),
        {"n1": 89, "n2": 89, "n3": 89},
        id="registry-port-is-not-a-tag",
    ),
]


@pytest.mark.parametrize(("images", "incoming", "expected"), CASES)
def test_score(
    images: list[dict[str, int]], incoming: dict[str, Any], expected: dict[str, int]
) -> None:
    snap = snapshot([node(f"n{i + 1}", images=imgs) for i, imgs in enumerate(images)])
    result = run_score(ImageLocality(), snap, incoming)
    assert result is not None
    raw, normalized = result
    assert raw == expected
    assert normalized == expected


def test_spread_counts_all_nodes_not_candidates() -> None:
    nodes = [
        node("n1", images={"a:1": 300 * MB}),
        node("n2", images={"a:1": 300 * MB, "b:1": 100 * MB}),
    ]
    nodes += [node("n3"), node("n4")]
    snap = snapshot(nodes)
    # a:1 on 2 of 4 nodes: int(300MiB * 0.5); b:1 on 1 of 4: int(100MiB * 0.25).
    assert run_score(ImageLocality(), snap, pod("p", image="a:1"), ["n1"]) == (
        {"n1": 12},
        {"n1": 12},
    )
    both = pod("p", image="a:1", extra_images=["b:1"])
    assert run_score(ImageLocality(), snap, both, ["n2", "n3"]) == (
        {"n2": 7, "n3": 0},
        {"n2": 7, "n3": 0},
    )


def test_image_with_several_names() -> None:
    snap = snapshot([node("n1", images=[(["a:1", "registry/a:1"], 900 * MB)]), node("n2")])
    # int(900MiB * 1/2) = 450MiB -> 100 * (450 - 23) / 977
    assert run_score(ImageLocality(), snap, pod("p", image="registry/a:1"))[0] == {
        "n1": 43,
        "n2": 0,
    }  # type: ignore[index]


def test_index_follows_node_updates() -> None:
    from podium.kube.objects import parse_node
    from podium.state.cache import Cache
    from podium.state.snapshot import Snapshot

    cache = Cache()
    cache.add_node(parse_node(node("n1")))
    cache.add_node(parse_node(node("n2")))
    snap = Snapshot()
    snap.update(cache)
    incoming = pod("p", image="a:1")
    assert run_score(ImageLocality(), snap, incoming) == ({"n1": 0, "n2": 0}, {"n1": 0, "n2": 0})
    cache.update_node(parse_node(node("n2", images={"a:1": 1000 * MB})))
    snap.update(cache)
    assert run_score(ImageLocality(), snap, incoming) == ({"n1": 0, "n2": 48}, {"n1": 0, "n2": 48})
    cache.update_node(parse_node(node("n2")))
    snap.update(cache)
    assert run_score(ImageLocality(), snap, incoming) == ({"n1": 0, "n2": 0}, {"n1": 0, "n2": 0})


@pytest.mark.parametrize(
    ("total", "count", "score"),
    [
        pytest.param(0, 0, 0, id="no-images-at-all"),
        pytest.param(23 * MB, 1, 0, id="exactly-min"),
        pytest.param(1000 * MB, 1, 100, id="exactly-max"),
        pytest.param(23 * MB + 1, 1, 0, id="just-above-min-truncates"),
        pytest.param(5000 * MB, 3, 100, id="clamped-to-max"),
    ],
)
def test_calculate_priority(total: int, count: int, score: int) -> None:
    assert int(calculate_priority(np.array([total], dtype=np.int64), count)[0]) == score


def test_metadata() -> None:
    assert ImageLocality.default_weight == 1
    assert ImageLocality.description
    assert ImageLocality.events == ClusterEvent(0)
