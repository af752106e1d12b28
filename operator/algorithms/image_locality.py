"""ImageLocality: prefer nodes that already hold the pod's container images.

imagelocality.go: for every init and regular container (and image volume)
whose image the node has, add ``int64(size * nodesWithImage / totalNodes)``;
clamp the sum to [23 MiB, 1000 MiB x images] and scale it to 0..100 with
Go's truncating division. Names without a tag mean ``:latest``.

kube-scheduler takes an image's size from the first node that reported it
(one ImageStateSummary per name for the whole cache); Podium uses each
node's own reported size, which differs only when nodes disagree about the
size of the same image name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from podium.framework import signers
from podium.framework.plugin import (
    MAX_NODE_SCORE,
    ClusterEvent,
    Cycle,
    IndexArray,
    IntArray,
    ScorePlugin,
    SignFragments,
)
from podium.framework.registry import register
from podium.kube.objects import PodInfo, normalize_image
from podium.state.rows import RowTracker, kept_index, same_object

if TYPE_CHECKING:
    from podium.kube.objects import NodeInfo
    from podium.state.snapshot import Snapshot

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


class ImageIndex:
    """Which nodes hold each image, and its size there; updated per changed node."""

    def __init__(self) -> None:
        self.tracker: RowTracker[NodeInfo] = RowTracker(same_object)
        self.by_image: dict[str, dict[str, int]] = {}
        self.arrays: dict[str, tuple[NDArray[np.intp], IntArray]] = {}
        self.row_of: Mapping[str, int] = {}
        self.stamp: tuple[int, int] | None = None

    def refresh(self, snapshot: Snapshot) -> None:
        stamp = (snapshot.generation, len(snapshot.nodes))
        if stamp == self.stamp:
            return
        self.stamp = stamp
        if snapshot.index is not self.row_of:
            self.arrays.clear()  # rows were renumbered
            self.row_of = snapshot.index
        for name, old, new in self.tracker.changes(snapshot, snapshot.nodes):
            for image in old.images if old is not None else ():
                nodes = self.by_image.get(image)
                if nodes is not None:
                    nodes.pop(name, None)
                    self.arrays.pop(image, None)
                    if not nodes:
                        del self.by_image[image]
            for image, size in new.images.items() if new is not None else ():
                self.by_image.setdefault(image, {})[name] = size
                self.arrays.pop(image, None)

    def rows(self, image: str) -> tuple[NDArray[np.intp], IntArray]:
        """Rows that hold ``image``, and its size on each."""
        cached = self.arrays.get(image)
        if cached is None:
            found = self.by_image.get(image, {})
            cached = self.arrays[image] = (
                np.fromiter((self.row_of[n] for n in found), dtype=np.intp, count=len(found)),
                np.fromiter(found.values(), dtype=np.int64, count=len(found)),
            )
        return cached


def image_index(snapshot: Snapshot) -> ImageIndex:
    return kept_index(snapshot, "images", ImageIndex)


def pod_images(pod: PodInfo) -> tuple[list[str], int]:
    """Normalised image names to look up, and how many images the pod has in all."""
    spec = pod.raw.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    names: list[str] = []
    count = 0
    for part in ("initContainers", "containers"):
        containers = spec.get(part)
        for container in containers if isinstance(containers, list) else []:
            image = container.get("image") if isinstance(container, Mapping) else None
            names.append(normalize_image(str(image or "")))
            count += 1
    for volume in pod.volumes:
        image = volume.get("image")
        if isinstance(image, Mapping):
            names.append(normalize_image(str(image.get("reference") or "")))
            count += 1
    return names, count


def calculate_priority(sums: IntArray, count: int) -> IntArray:
    """calculatePriority: clamp, then 100 * (sum - min) / (max - min), truncated."""
    high = MAX_CONTAINER_THRESHOLD * count
    clamped = np.where(sums < MIN_THRESHOLD, MIN_THRESHOLD, np.where(sums > high, high, sums))
    numerator = MAX_NODE_SCORE * (clamped - MIN_THRESHOLD)
    denominator = high - MIN_THRESHOLD
    quotient = np.abs(numerator) // abs(denominator)
    out: IntArray = np.where((numerator < 0) != (denominator < 0), -quotient, quotient)
    return out


@register
class ImageLocality(ScorePlugin):
    name = "ImageLocality"
    description = (
        "Prefers nodes that already have the pod's images, weighted by how widely they are spread."
    )
    default_weight = 1
    events = ClusterEvent(0)  # a score never rejects a node

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """ImageLocality.SignPod: the distinct normalised images of the containers and
        init containers, sorted."""
        pod = cycle.pod
        spec = pod.raw.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        names = set()
        for part in ("containers", "initContainers"):
            containers = spec.get(part)
            for container in containers if isinstance(containers, list) else []:
                image = container.get("image") if isinstance(container, Mapping) else None
                names.add(normalize_image(str(image or "")))
        return {signers.IMAGE_NAMES: sorted(names)}

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        snap = cycle.snapshot
        names, count = pod_images(cycle.pod)
        total = len(snap)
        sums: IntArray | None = None
        if total:
            index = image_index(snap)
            for name in names:
                rows, sizes = index.rows(name)
                if rows.size:
                    if sums is None:
                        sums = np.zeros(total, dtype=np.int64)
                    spread = float(rows.size) / float(total)
                    sums[rows] += (sizes.astype(np.float64) * spread).astype(np.int64)
        if sums is None:
            # No node has any of the images: every sum clamps to MIN_THRESHOLD, scoring 0.
            return np.zeros(len(nodes), dtype=np.int64)
        return calculate_priority(sums[nodes], count)
