"""A columnar, generation-stamped copy of the cache for one scheduling cycle.

Rows are nodes, in kube-scheduler's zone-interleaved order; columns are numpy
arrays (allocatable, requested, pod counts, flags), so a filter over 5,000
nodes is a handful of vector operations. ``update`` rewrites only rows whose
node generation is newer than the snapshot's, like UpdateNodeNameToInfoMap,
and rebuilds the arrays only when nodes join or leave or a new resource
name appears.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from podium.kube.objects import HostPort, NodeInfo, PodInfo
from podium.state.arrays import IndexArray, IntArray, MaskArray
from podium.state.cache import Cache, NodeState
from podium.state.dra import DraStore
from podium.state.selectors import SelectorStore
from podium.state.volumes import VolumeStore

__all__ = ["BASE_RESOURCES", "RowBackup", "Snapshot", "build_snapshot"]

BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


def _zone_interleave(states: Iterable[NodeState]) -> list[NodeState]:
    """nodeTree order: one node from each zone in turn, zones in order of appearance."""
    zones: dict[str, list[NodeState]] = {}
    for state in states:
        assert state.node is not None
        zones.setdefault(state.node.zone, []).append(state)
    ordered: list[NodeState] = []
    columns = list(zones.values())
    depth = max((len(c) for c in columns), default=0)
    for i in range(depth):
        ordered.extend(column[i] for column in columns if i < len(column))
    return ordered


@dataclass(slots=True)
class RowBackup:
    """A row's pod-derived columns, saved by ``Snapshot.edit_row``."""

    pods: dict[str, PodInfo]
    ports: Counter[HostPort]
    requested: IntArray
    pod_count: int
    nonzero_cpu: int
    nonzero_memory: int


class Snapshot:
    def __init__(self) -> None:
        self.generation = -1
        self.membership = -1
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.nodes: list[NodeInfo] = []
        self.pods: list[dict[str, PodInfo]] = []
        self.ports: list[Counter[HostPort]] = []
        self.resources: list[str] = list(BASE_RESOURCES)
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        self.version = 0
        self._allocate(0)
        self._label_columns: dict[str, tuple[np.ndarray, MaskArray]] = {}
        self._feature_columns: dict[str, MaskArray] = {}
        self.pod_generation = 0
        self.namespace_labels: dict[str, dict[str, str]] = {}
        # Rows under what-if edits that stand for the framework's AddPod/RemovePod on a
        # PreFilter state (preemption, nominated pods): row -> its pods before the edits.
        self.unedited: dict[int, dict[str, PodInfo]] = {}
        # Shared with the scheduler, like namespace_labels: storage is not per node.
        self.volumes = VolumeStore()
        # The same for the Service and controller selectors of default topology spreading.
        self.selectors = SelectorStore()
        # And the DRA objects and in-flight allocations of DynamicResources.
        self.dra = DraStore()

    def _allocate(self, n: int) -> None:
        r = len(self.resources)
        self.allocatable: IntArray = np.zeros((n, r), dtype=np.int64)
        self.requested: IntArray = np.zeros((n, r), dtype=np.int64)
        self.max_pods: IntArray = np.zeros(n, dtype=np.int64)
        self.pod_count: IntArray = np.zeros(n, dtype=np.int64)
        self.nonzero_cpu: IntArray = np.zeros(n, dtype=np.int64)
        self.nonzero_memory: IntArray = np.zeros(n, dtype=np.int64)
        self.unschedulable: MaskArray = np.zeros(n, dtype=bool)
        self.not_ready: MaskArray = np.zeros(n, dtype=bool)
        self.pressure: dict[str, MaskArray] = {c: np.zeros(n, dtype=bool) for c in _PRESSURE}
        self.tainted: MaskArray = np.zeros(n, dtype=bool)
        self.has_ports: MaskArray = np.zeros(n, dtype=bool)
        self.has_pods: MaskArray = np.zeros(n, dtype=bool)
        # The update that last wrote each row, so indexes can re-read only those rows.
        self.row_version: IntArray = np.zeros(n, dtype=np.int64)
        # The same writes as a log, (version, row) in order, so an index that looked at
        # ``version`` v finds the rows written since in O(written), not O(nodes): at 65,000
        # nodes a scan of ``row_version`` per index per cycle was a tenth of a cycle.
        # Versions up to ``log_floor`` have left the log (a rebuild, or the log's cap).
        self.write_log: list[tuple[int, int]] = []
        self.log_floor = self.version

    def __len__(self) -> int:
        return len(self.names)

    # -- maintenance ---------------------------------------------------------
    def update(self, cache: Cache) -> None:
        """Bring the snapshot to the cache's generation, copying only changed nodes."""
        if cache.membership != self.membership:
            self._rebuild(cache)
            return
        if cache.generation == self.generation:
            return
        changed: list[NodeState] = []
        for name, generation in reversed(cache.changed.items()):
            if generation <= self.generation:
                break
            state = cache.nodes.get(name)
            if state is not None and state.node is not None and name in self.index:
                changed.append(state)
        if any(self._needs_new_columns(s) for s in changed):
            self._rebuild(cache)
            return
        labels_changed = features_changed = False
        self.version += 1
        for state in changed:
            i = self.index[state.name]
            new = state.node
            assert new is not None
            labels_changed |= self.nodes[i].labels != new.labels
            features_changed |= self.nodes[i].declared_features != new.declared_features
            self._write_row(i, state)
        if labels_changed:
            self._label_columns.clear()
        if features_changed:
            self._feature_columns.clear()
        self.generation = cache.generation
        self.pod_generation += 1

    def _needs_new_columns(self, state: NodeState) -> bool:
        assert state.node is not None
        return any(r not in self.resource_index for r in state.node.allocatable if r != "pods")

    def _rebuild(self, cache: Cache) -> None:
        """New rows in nodeTree order. A node the cache has not changed since this
        snapshot last looked keeps its row's values, gathered from the old arrays, so
        a node joining or leaving costs array copies and the changed rows' writes, not
        a Python write of every row."""
        states = _zone_interleave(s for s in cache.nodes.values() if s.node is not None)
        names: set[str] = set(BASE_RESOURCES)
        for state in states:
            assert state.node is not None
            names.update(r for r in state.node.allocatable if r != "pods")
        resources = list(BASE_RESOURCES) + sorted(names - set(BASE_RESOURCES))
        kept = self._unchanged_rows(states) if resources == self.resources else {}
        old_columns = self._row_columns()
        old_pods, old_ports = self.pods, self.ports
        self.resources = resources
        self.resource_index = {r: i for i, r in enumerate(self.resources)}
        self.names = [s.name for s in states]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.nodes = [s.node for s in states]  # type: ignore[misc]
        self.pods = [{} for _ in states]
        self.ports = [Counter() for _ in states]
        self._allocate(len(states))
        self.version += 1
        if kept:
            new_rows = np.fromiter(kept, dtype=np.intp, count=len(kept))
            old_rows = np.fromiter(kept.values(), dtype=np.intp, count=len(kept))
            for name, column in self._row_columns().items():
                column[new_rows] = old_columns[name][old_rows]
        for i, state in enumerate(states):
            j = kept.get(i)
            if j is None:
                self._write_row(i, state)
            else:
                self.pods[i], self.ports[i] = old_pods[j], old_ports[j]
                self._stamp(i)
        self._label_columns.clear()
        self._feature_columns.clear()
        self.generation = cache.generation
        self.membership = cache.membership
        self.pod_generation += 1

    def _unchanged_rows(self, states: list[NodeState]) -> dict[int, int]:
        """new row -> old row, for the nodes unchanged since the last update (their
        cache generation is not newer, and no what-if edit is outstanding)."""
        if self.unedited:
            return {}
        kept: dict[int, int] = {}
        for i, state in enumerate(states):
            j = self.index.get(state.name)
            if j is None or state.generation > self.generation or self.nodes[j] is not state.node:
                continue
            kept[i] = j
        return kept

    def _row_columns(self) -> dict[str, np.ndarray]:
        """Every per-row array ``_write_row`` fills (``row_version`` is stamped anew)."""
        columns: dict[str, np.ndarray] = {
            "allocatable": self.allocatable,
            "requested": self.requested,
            "max_pods": self.max_pods,
            "pod_count": self.pod_count,
            "nonzero_cpu": self.nonzero_cpu,
            "nonzero_memory": self.nonzero_memory,
            "unschedulable": self.unschedulable,
            "not_ready": self.not_ready,
            "tainted": self.tainted,
            "has_ports": self.has_ports,
            "has_pods": self.has_pods,
        }
        for condition, column in self.pressure.items():
            columns[f"pressure/{condition}"] = column
        return columns

    def _write_row(self, i: int, state: NodeState) -> None:
        node = state.node
        assert node is not None
        self.nodes[i] = node
        self.pods[i] = dict(state.pods)
        self.ports[i] = Counter(state.ports)
        # Zero the row, then write the node's own resources: a cluster whose device
        # plugins name a resource per node has hundreds of columns, almost all 0 here.
        index = self.resource_index
        self.allocatable[i] = 0
        self.requested[i] = 0
        for r, amount in node.allocatable.items():
            col = index.get(r)
            if col is not None:
                self.allocatable[i, col] = amount
        for r, amount in state.requested.items():
            col = index.get(r)
            if col is not None:
                self.requested[i, col] = amount
        self.max_pods[i] = node.allocatable.get("pods", 0)
        self.pod_count[i] = len(state.pods)
        self.nonzero_cpu[i] = state.nonzero_cpu
        self.nonzero_memory[i] = state.nonzero_memory
        self.unschedulable[i] = node.unschedulable
        self.not_ready[i] = node.conditions.get("Ready") != "True"
        for condition, column in self.pressure.items():
            column[i] = node.conditions.get(condition) == "True"
        self.tainted[i] = bool(node.taints)
        self.has_ports[i] = bool(state.ports)
        self.has_pods[i] = bool(state.pods)
        self._stamp(i)

    # -- what-if edits (preemption, nominated pods) --------------------------
    def edit_row(
        self,
        i: int,
        remove: Iterable[PodInfo] = (),
        add: Iterable[PodInfo] = (),
        *,
        framework: bool = True,
    ) -> RowBackup:
        """Rewrite row ``i`` as if ``remove`` left the node and ``add`` joined it.

        Returns what ``restore_row`` needs to put the row back exactly. Both
        stamp the row with a new version, so incremental indexes re-read just
        that row. Only for the failure path and nominated pods: the cache is
        not touched, and ``update`` must not run between edit and restore.
        ``framework``: the edit stands for kube-scheduler's AddPod/RemovePod on a
        PreFilter state, so the row's pods before it are kept in ``unedited`` for the
        plugins whose incremental update counts differently from a recount.
        """
        if framework:
            self.unedited.setdefault(i, self.pods[i])
        backup = RowBackup(
            self.pods[i],
            self.ports[i],
            self.requested[i].copy(),
            int(self.pod_count[i]),
            int(self.nonzero_cpu[i]),
            int(self.nonzero_memory[i]),
        )
        pods = dict(self.pods[i])
        ports = Counter(self.ports[i])
        for pod, sign in [(p, -1) for p in remove] + [(p, 1) for p in add]:
            if sign < 0 and pods.pop(pod.uid, None) is None:
                continue
            if sign > 0:
                if pod.uid in pods:
                    continue
                pods[pod.uid] = pod
            for r, amount in pod.requests.items():
                col = self.resource_index.get(r)
                if col is not None:
                    self.requested[i, col] += sign * amount
            self.nonzero_cpu[i] += sign * pod.nonzero_cpu
            self.nonzero_memory[i] += sign * pod.nonzero_memory
            for port in pod.host_ports:
                ports[port] += sign
        self._set_pods(i, pods, +ports)
        return backup

    def restore_row(self, i: int, backup: RowBackup) -> None:
        self.requested[i] = backup.requested
        self.nonzero_cpu[i] = backup.nonzero_cpu
        self.nonzero_memory[i] = backup.nonzero_memory
        self._set_pods(i, backup.pods, backup.ports)
        if self.unedited.get(i) is backup.pods:  # the outermost edit undone
            del self.unedited[i]

    def _set_pods(self, i: int, pods: dict[str, PodInfo], ports: Counter[HostPort]) -> None:
        self.pods[i] = pods
        self.ports[i] = ports
        self.pod_count[i] = len(pods)
        self.has_ports[i] = bool(ports)
        self.has_pods[i] = bool(pods)
        self.version += 1
        self._stamp(i)
        self.pod_generation += 1

    def _stamp(self, i: int) -> None:
        """Row ``i`` was written at the current version: in ``row_version`` and the log,
        which is cut once it holds four writes per node (readers then scan the column)."""
        self.row_version[i] = self.version
        log = self.write_log
        if len(log) >= 4 * len(self.names) + 64:
            self.log_floor = log[-1][0]
            log.clear()
        log.append((self.version, i))

    def rows_written_since(self, version: int) -> list[int]:
        """The rows written after ``version``, each once, in row order (as a scan gives)."""
        if version < self.log_floor:
            return list(np.flatnonzero(self.row_version > version).tolist())
        log = self.write_log
        start = bisect.bisect_right(log, (version, len(self.names)))
        if start == len(log):
            return []
        return sorted({row for _, row in log[start:]})

    # -- queries -------------------------------------------------------------
    def all_nodes(self) -> IndexArray:
        return np.arange(len(self.names), dtype=np.intp)

    def resource_column(self, name: str) -> int | None:
        return self.resource_index.get(name)

    def label_column(self, key: str) -> tuple[np.ndarray, MaskArray]:
        """Values of one node label as an object array, and where the label is present."""
        cached = self._label_columns.get(key)
        if cached is None:
            values = np.array([n.labels.get(key, "") for n in self.nodes], dtype=object)
            present = np.array([key in n.labels for n in self.nodes], dtype=bool)
            cached = self._label_columns[key] = (values, present)
        return cached

    def feature_column(self, feature: str) -> MaskArray:
        """Which nodes list ``feature`` in status.declaredFeatures."""
        cached = self._feature_columns.get(feature)
        if cached is None:
            cached = self._feature_columns[feature] = np.fromiter(
                (feature in n.declared_features for n in self.nodes), bool, count=len(self.nodes)
            )
        return cached

    def iter_pods(self) -> Iterable[tuple[int, PodInfo]]:
        for i, pods in enumerate(self.pods):
            for pod in pods.values():
                yield i, pod


def build_snapshot(
    nodes: Iterable[NodeInfo],
    pods: Iterable[PodInfo],
    *,
    storage: Iterable[Mapping[str, Any]] = (),
    selectors: Iterable[Mapping[str, Any]] = (),
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[Cache, Snapshot]:
    """A cache of ``nodes`` and the bound, non-terminal ``pods``, and a snapshot of it.

    The one way the tools (and tests) turn objects read from a cluster or a
    file into what the scheduling cycle reads; storage objects, workload
    selectors and namespace labels go where the live scheduler keeps them.
    """
    cache = Cache()
    for node in nodes:
        cache.add_node(node)
    for pod in pods:
        if pod.bound and not pod.terminal:
            cache.add_pod(pod)
    snapshot = Snapshot()
    snapshot.volumes.load(storage)
    snapshot.dra.load(storage)  # DRA objects travel with the storage objects
    snapshot.selectors.load(selectors)
    snapshot.namespace_labels = {k: dict(v) for k, v in (namespace_labels or {}).items()}
    snapshot.update(cache)
    return cache, snapshot
