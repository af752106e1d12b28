"""NoDiskConflict: the seed's disk-conflict predicate, with volumerestrictions' rules.

A node is rejected when a pod on it already uses the same
- GCE persistent disk (pdName), unless both mounts are read-only;
- AWS EBS volume (volumeID), read-only or not;
- iSCSI target (IQN), unless both are read-only;
- Ceph RBD image (same pool and image, overlapping monitors), unless both
  are read-only; a missing pool is the API default ``rbd``.
This is VolumeRestrictions' disk check without its ReadWriteOncePod part;
VolumeRestrictions (in the default profile) extends this class, and the
seed's name stays registered for policies that list it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from podium.framework.plugin import ClusterEvent, Cycle, FilterPlugin, IndexArray, Rejection
from podium.framework.registry import register
from podium.state.rows import RowTracker, kept_index, same_pods

if TYPE_CHECKING:
    from podium.kube.objects import PodInfo
    from podium.state.snapshot import Snapshot

REASON = "node(s) had no available disk"


@dataclass(frozen=True, slots=True)
class DiskUse:
    """One pod's use of one disk; ``key`` identifies the disk."""

    key: tuple[str, ...]
    read_only: bool
    monitors: frozenset[str] = frozenset()

    def conflicts(self, other: DiskUse) -> bool:
        """isVolumeConflict for two uses of the same disk key."""
        kind = self.key[0]
        if kind == "ebs":
            return True
        if kind == "rbd" and not (self.monitors & other.monitors):
            return False
        return not (self.read_only and other.read_only)

    def describe(self) -> str:
        kind, *name = self.key
        mode = "read-only" if self.read_only else "read-write"
        return f"{kind} {'/'.join(name)} ({mode})"


def disk_uses(pod: PodInfo) -> list[DiskUse]:
    out = []
    for volume in pod.volumes:
        for source, kind, field in (
            ("gcePersistentDisk", "gce", "pdName"),
            ("awsElasticBlockStore", "ebs", "volumeID"),
            ("iscsi", "iscsi", "iqn"),
        ):
            spec = volume.get(source)
            if isinstance(spec, Mapping):
                out.append(
                    DiskUse((kind, str(spec.get(field) or "")), spec.get("readOnly") is True)
                )
        rbd = volume.get("rbd")
        if isinstance(rbd, Mapping):
            monitors = rbd.get("monitors")
            out.append(
                DiskUse(
                    ("rbd", str(rbd.get("pool") or "rbd"), str(rbd.get("image") or "")),
                    rbd.get("readOnly") is True,
                    frozenset(str(m) for m in monitors)
                    if isinstance(monitors, list)
                    else frozenset(),
                )
            )
    return out


class DiskIndex:
    """Disks in use, by disk key, then node name; updated per changed node."""

    def __init__(self) -> None:
        self.tracker: RowTracker[dict[str, PodInfo]] = RowTracker(same_pods)
        self.by_disk: dict[tuple[str, ...], dict[str, list[tuple[DiskUse, PodInfo]]]] = {}
        self.stamp: tuple[int, int, int] | None = None

    def refresh(self, snapshot: Snapshot) -> None:
        stamp = (snapshot.generation, snapshot.pod_generation, len(snapshot.pods))
        if stamp == self.stamp:
            return
        self.stamp = stamp
        for name, old, new in self.tracker.changes(snapshot, snapshot.pods):
            for pod in (old or {}).values():
                for use in disk_uses(pod):
                    nodes = self.by_disk.get(use.key)
                    if nodes is not None:
                        nodes.pop(name, None)
                        if not nodes:
                            del self.by_disk[use.key]
            for pod in (new or {}).values():
                for use in disk_uses(pod):
                    self.by_disk.setdefault(use.key, {}).setdefault(name, []).append((use, pod))


def disk_index(snapshot: Snapshot) -> DiskIndex:
    return kept_index(snapshot, "disks", DiskIndex)


@register
class NoDiskConflict(FilterPlugin):
    name = "NoDiskConflict"
    description = (
        "Rejects nodes where another pod already uses the same GCE PD, AWS EBS, "
        "iSCSI or RBD disk in a conflicting mode."
    )
    events = ClusterEvent.NODE_ADD | ClusterEvent.ASSIGNED_POD_DELETE

    def _conflicts(self, cycle: Cycle) -> dict[int, list[tuple[DiskUse, DiskUse, PodInfo]]]:
        cached = cycle.state.get("NoDiskConflict/rows")
        if cached is None:
            cached = {}
            wanted = disk_uses(cycle.pod)
            if wanted:
                index = disk_index(cycle.snapshot)
                row_of = cycle.snapshot.index
                for use in wanted:
                    for name, uses in index.by_disk.get(use.key, {}).items():
                        row = row_of[name]
                        for other, pod in uses:
                            if use.conflicts(other):
                                cached.setdefault(row, []).append((use, other, pod))
            cycle.state["NoDiskConflict/rows"] = cached
        rows: dict[int, list[tuple[DiskUse, DiskUse, PodInfo]]] = cached
        return rows

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        rows = self._conflicts(cycle)
        if not rows:
            return []
        mask = np.isin(nodes, np.fromiter(rows, dtype=np.intp, count=len(rows)))
        return [Rejection(REASON, mask)] if mask.any() else []

    def explain(self, cycle: Cycle, node: int) -> str:
        return ", ".join(
            f"{use.describe()} conflicts with pod {pod.key} using {other.describe()}"
            for use, other, pod in self._conflicts(cycle).get(node, [])
        )
